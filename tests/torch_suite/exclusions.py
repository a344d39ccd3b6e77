"""Tests of the suite that do not run, per backend, each with the reason. Nothing else is left out:
every other test runs, or is skipped by the suite's own gates exactly as in a Gloo run
(suite.py). run.py refuses to start when a name here is not a test of the suite any more."""

LOOM = {
    # DDP's logging data takes "backend_name" from c10d::ProcessGroup::getBackendName(), which names
    # the group's BackendType, and every backend registered through Backend.register_backend has
    # type CUSTOM: "custom". The test compares it with dist.get_backend() ("loom"), which no
    # third-party backend can pass. Every other assertion of the test passes on Loom (run once with
    # that one comparison removed).
    "test_ddp_logging_data_cpu": "torch reports every third-party backend's name to DDP as 'custom' "
                                 "(ProcessGroup::getBackendName of BackendType::CUSTOM); the test expects 'loom'",
}

GLOO = {}


def excluded_for(backend):
    return {"loom": LOOM, "gloo": GLOO}[backend]
