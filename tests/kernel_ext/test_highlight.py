"""Highlighting and the line diff behind the stepper's marks."""

from kernel_ext.highlight import changed_lines, code_html, highlight_lines, removed_count


def test_line_diff_marks_new_and_changed_lines_only():
    before = "a\nb\nc\nd"
    after = "a\nB\nc\nx\nd"
    assert changed_lines(before, after) == [1, 3]
    assert removed_count(before, after) == 1
    assert changed_lines(before, before) == []


def test_code_html_keeps_one_fragment_per_line_and_escapes():
    text = 'x = "<b>"\n\nfor i in range(3):\n    pass'
    frags = highlight_lines(text)
    assert len(frags) == 4 and "<b>" not in frags[0] and "&lt;b&gt;" in frags[0]
    out = code_html(text, marked=[2], dim_from=3)
    assert out.count('data-changed="1"') == 1 and out.count('data-dimmed="1"') == 1
    assert "style=" in frags[2]  # keywords are coloured inline (no stylesheet needed)


def test_reindented_lines_are_not_changes():
    before = "for i in range(4):\n    x = i"
    after = "for o in T.parallel(2):\n    for i in range(2):\n        x = i"
    assert changed_lines(before, after) == [0, 1]  # the loops, not the re-indented body
