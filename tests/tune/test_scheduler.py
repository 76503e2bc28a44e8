"""Task schedulers: round-robin order, Ansor's gradient-based choice."""

from workbench.tune import GradientBased, RoundRobin, TaskScheduler, TaskState


def state(*batches, weight=1.0):
    s = TaskState(weight=weight)
    for trials, best in batches:
        s.record(trials, [best])
    return s


def test_round_robin_cycles_and_skips_finished_tasks():
    states = [TaskState(), TaskState(), TaskState()]
    rr = RoundRobin()
    assert [rr.next(states) for _ in range(4)] == [0, 1, 2, 0]
    states[1].done = True
    assert [rr.next(states) for _ in range(3)] == [2, 0, 2]
    for s in states:
        s.done = True
    assert rr.next(states) is None


def test_gradient_warms_up_every_task_then_chases_the_largest_gain():
    g = GradientBased(eps=0.0)
    states = [state((16, 1e-3)), TaskState(), state((16, 5e-3))]
    assert g.next(states) == 1  # never tuned: first
    states[1].record(16, [2e-3])
    assert g.next(states) == 2  # 5 ms has the most to gain
    states[2].weight = 0.1  # ... unless it rarely runs
    assert g.next(states) == 1


def test_gradient_sees_recent_progress():
    g = GradientBased(eps=0.0, alpha=0.9, window=1)
    stuck = state((16, 4e-3), (16, 4e-3))
    improving = state((16, 4e-3), (16, 2e-3))
    assert g.gradient(improving) < g.gradient(stuck)
    assert g.next([stuck, improving]) == 1


def test_a_task_without_a_working_candidate_goes_first():
    g = GradientBased(eps=0.0)
    failing = state((16, float("inf")))
    assert g.next([state((16, 9e-3)), failing]) == 1


def test_shortcuts():
    assert isinstance(TaskScheduler.create("round_robin"), RoundRobin)
    assert isinstance(TaskScheduler.create("gradient"), GradientBased)
