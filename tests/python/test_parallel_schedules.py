"""Pipeline schedules: the checker accepts every built schedule (stages 1..8, micro-batches 1..16) with
exactly the promised activation peak, rejects broken ones with a message naming the problem, and the
simulator reproduces the textbook bubble."""
import dataclasses

import pytest

from loom.parallel import schedules as S
from loom.parallel.schedule_check import ScheduleError, check
from loom.parallel.schedule_sim import simulate


def built():
    for p in range(1, 9):
        for m in range(1, 17):
            yield S.gpipe(p, m)
            yield S.one_f_one_b(p, m)
            if m % p == 0:
                for v in (2, 3):
                    yield S.interleaved_1f1b(p, m, v)


def test_checker_accepts_every_built_schedule():
    count = 0
    for schedule in built():
        assert check(schedule) == schedule.promised_peak, (schedule.name, schedule.stages, schedule.microbatches)
        count += 1
    assert count > 250


def test_promised_peaks_are_the_known_ones():
    assert S.gpipe(4, 8).promised_peak == [8, 8, 8, 8]
    assert S.one_f_one_b(4, 8).promised_peak == [4, 3, 2, 1]
    assert S.one_f_one_b(4, 2).promised_peak == [2, 2, 2, 1]


def test_interleaved_needs_whole_groups_of_microbatches():
    with pytest.raises(ValueError, match="multiple of the pipeline stages"):
        S.interleaved_1f1b(4, 6, 2)


def replace(schedule, rank, index, new):
    actions = [list(a) for a in schedule.actions]
    if new is None:
        del actions[rank][index]
    else:
        actions[rank][index] = new
    return dataclasses.replace(schedule, actions=actions)


def first(schedule, rank, kind, pred=lambda a: True):
    return next(i for i, a in enumerate(schedule.actions[rank]) if isinstance(a, kind) and pred(a))


def test_rejects_a_deadlock():
    # Stage 1's first two communication steps swapped: it waits for micro-batch 1's activation first.
    s = S.gpipe(2, 2)
    a = list(s.actions[1])
    i, j = [k for k, x in enumerate(a) if isinstance(x, S.Comm)][:2]
    a[i], a[j] = a[j], a[i]
    broken = dataclasses.replace(s, actions=[s.actions[0], a])
    with pytest.raises(ScheduleError):
        check(broken)
    # A true cycle: each stage receives before it sends.
    p0 = [S.Comm((S.Recv(S.GRADIENT, 0, 1, 0),)), S.Forward(0, 0), S.Comm((S.Send(S.ACTIVATION, 0, 0, 1),)),
          S.Backward(0, 0)]
    p1 = [S.Comm((S.Recv(S.ACTIVATION, 0, 0, 1),)), S.Forward(0, 1), S.Backward(0, 1),
          S.Comm((S.Send(S.GRADIENT, 0, 1, 0),))]
    cyclic = S.Schedule("cycle", 2, 1, 1, [p0, p1], [1, 1])
    with pytest.raises(ScheduleError, match="deadlock"):
        check(cyclic)


def test_rejects_a_missing_receive():
    s = S.one_f_one_b(2, 2)
    i = first(s, 1, S.Comm, lambda c: any(isinstance(op, S.Recv) and op.microbatch == 1 for op in c.ops))
    ops = tuple(op for op in s.actions[1][i].ops if not isinstance(op, S.Recv))
    broken = replace(s, 1, i, S.Comm(ops) if ops else None)
    with pytest.raises(ScheduleError, match="missing receive|before receiving"):
        check(broken)


def test_rejects_backward_before_forward():
    s = S.gpipe(1, 2)
    broken = dataclasses.replace(s, actions=[[S.Backward(0, 0), S.Forward(0, 0), S.Forward(1, 0), S.Backward(1, 0)]])
    with pytest.raises(ScheduleError, match="before Forward"):
        check(broken)


def test_rejects_a_mismatched_message_and_a_broken_promise():
    s = S.gpipe(2, 2)
    i = first(s, 1, S.Comm)
    broken = replace(s, 1, i, S.Comm((S.Recv(S.ACTIVATION, 1, 0, 1),)))
    with pytest.raises(ScheduleError, match="would receive"):
        check(broken)
    with pytest.raises(ScheduleError, match="more than the 1 promised"):
        check(dataclasses.replace(s, promised_peak=[1, 1]))


def test_rejects_a_missing_or_repeated_computation():
    s = S.gpipe(1, 2)
    with pytest.raises(ScheduleError, match="never runs"):
        check(replace(s, 0, first(s, 0, S.Backward), None))
    with pytest.raises(ScheduleError, match="twice"):
        check(dataclasses.replace(s, actions=[s.actions[0] + [S.Forward(0, 0)]]))


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_simulator_bubble_is_textbook(name):
    for p, m in ((2, 4), (4, 8), (8, 16)):
        t = simulate(S.build(name, p, m), forward=1.0, backward=2.0)
        assert t.step_time == pytest.approx((m + p - 1) * 3.0)
        assert t.bubble == pytest.approx((p - 1) / (m + p - 1))


def test_simulator_interleaving_shrinks_the_bubble_and_links_cost_time():
    p, m = 4, 8
    plain = simulate(S.one_f_one_b(p, m), 1.0, 2.0)
    inter = simulate(S.interleaved_1f1b(p, m, 2), 0.5, 1.0)
    assert inter.bubble < plain.bubble
    slow = simulate(S.one_f_one_b(p, m), 1.0, 2.0, link_time=0.5)
    assert slow.step_time > plain.step_time
