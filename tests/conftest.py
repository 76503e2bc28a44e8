"""Shared pytest options."""


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden text files (tests/**/golden/) instead of comparing",
    )
