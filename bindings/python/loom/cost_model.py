"""Loom's cost model of collectives (include/loom_model.h, through ctypes): what a communicator of any
group of a job's ranks would choose and how long it would take, on hosts a topology file describes.
The planner (loom.plan) times its layouts' collectives with it; it needs no torch.

    from loom.cost_model import CollectiveModel
    m = CollectiveModel(16, topology="hgx.xml")                 # 2 nodes of 8 GPUs
    m.collective("all_reduce", 1 << 30, list(range(16)))      # {"time_us": ..., "algorithm": "ring", ...}
"""
import ctypes

from .capi import LoomError, error_text, lib

_COLLECTIVES = {"all_reduce": 0, "all_gather": 1, "reduce_scatter": 2, "broadcast": 3, "reduce": 4,
                "all_to_all": 5, "gather": 6, "scatter": 7}
_MEMORY = {"auto": 0, "host": 1, "device": 2}


class _Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("world", ctypes.c_int), ("ranksPerNode", ctypes.c_int),
                ("topology", ctypes.c_char_p), ("memory", ctypes.c_int), ("nvswitchGbs", ctypes.c_double),
                ("machine", ctypes.c_char_p), ("maxChannels", ctypes.c_int), ("slotBytes", ctypes.c_size_t),
                ("calibration", ctypes.c_char_p)]


class _Request(ctypes.Structure):
    _fields_ = [("collective", ctypes.c_int), ("bytes", ctypes.c_size_t), ("elemBytes", ctypes.c_int),
                ("ranks", ctypes.POINTER(ctypes.c_int)), ("nranks", ctypes.c_int), ("concurrent", ctypes.c_int),
                ("root", ctypes.c_int), ("algorithm", ctypes.c_char_p), ("channels", ctypes.c_int),
                ("chunkBytes", ctypes.c_size_t)]


class _Prediction(ctypes.Structure):
    _fields_ = [("timeUs", ctypes.c_double), ("algorithm", ctypes.c_char * 16), ("channels", ctypes.c_int),
                ("chunkBytes", ctypes.c_size_t), ("count", ctypes.c_size_t), ("bytes", ctypes.c_size_t), ("algbwGbs", ctypes.c_double),
                ("busbwGbs", ctypes.c_double), ("note", ctypes.c_char * 160)]


class _Machine(ctypes.Structure):
    _fields_ = [("nranks", ctypes.c_int), ("ranksPerNode", ctypes.c_int), ("intraGbs", ctypes.c_double),
                ("latencyUs", ctypes.c_double), ("nicsPerNode", ctypes.c_int), ("nicGbs", ctypes.c_double),
                ("netLatencyUs", ctypes.c_double), ("stepUs", ctypes.c_double), ("launchUs", ctypes.c_double),
                ("copyGbs", ctypes.c_double), ("fifoSlots", ctypes.c_int), ("maxChannels", ctypes.c_int),
                ("device", ctypes.c_int), ("slotBytes", ctypes.c_size_t)]


_Model = ctypes.c_void_p
_SIGNATURES = {
    "loomModelCreate": [ctypes.POINTER(_Config), ctypes.POINTER(_Model)],
    "loomModelDestroy": [_Model],
    "loomModelWorld": [_Model, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)],
    "loomModelPredict": [_Model, ctypes.POINTER(_Request), ctypes.POINTER(_Prediction)],
    "loomModelPointToPoint": [_Model, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                              ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double)],
    "loomModelGetMachine": [_Model, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Machine)],
}
for _name, _args in _SIGNATURES.items():
    getattr(lib, _name).argtypes = _args
    getattr(lib, _name).restype = ctypes.c_int
lib.loomModelSource.argtypes = [_Model]
lib.loomModelSource.restype = ctypes.c_char_p


def _call(name, *args):
    result = getattr(lib, name)(*args)
    if result != 0:
        text = error_text(result)
        raise (ValueError(text) if result == 4 else LoomError(result, f"{name} failed: {text}"))


def _int_array(values):
    values = list(values)
    return (ctypes.c_int * len(values))(*values), len(values)


class CollectiveModel:
    """Loom's model of collectives over a job of `world` ranks in nodes of `ranks_per_node`.

    topology: "" for LOOM_TOPO_FILE or this machine, "none" for a machine given only by `machine`
    fields, else an hwloc or NCCL topology file of one node. memory: "auto", "host" or "device".
    nvswitch_gbs: join the file's GPUs by an NVSwitch at this rate (for files that leave NVLink out).
    machine: fields set after the topology's (intra_gbs, latency_us, net_latency_us, nics_per_node,
    nic_gbs, step_us, launch_us, copy_gbs, fifo_slots). max_channels and slot_bytes: 0 for a
    communicator's defaults. Bad arguments raise ValueError.
    """

    def __init__(self, world, ranks_per_node=0, topology="", memory="auto", machine=None, max_channels=0,
                 slot_bytes=0, nvswitch_gbs=0.0, calibration=None):
        if memory not in _MEMORY:
            raise ValueError(f"CollectiveModel: memory must be auto, host or device, got {memory!r}")
        fields = ",".join(f"{k}={float(v)!r}" for k, v in (machine or {}).items())
        config = _Config(ctypes.sizeof(_Config), int(world), int(ranks_per_node), topology.encode(), _MEMORY[memory],
                         float(nvswitch_gbs), fields.encode(), int(max_channels), int(slot_bytes),
                         calibration.encode() if calibration else None)
        self._handle = _Model()
        _call("loomModelCreate", ctypes.byref(config), ctypes.byref(self._handle))
        world_out, per_node = ctypes.c_int(), ctypes.c_int()
        _call("loomModelWorld", self._handle, ctypes.byref(world_out), ctypes.byref(per_node))
        self.world, self.ranks_per_node = world_out.value, per_node.value
        self.source = lib.loomModelSource(self._handle).decode()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            lib.loomModelDestroy(handle)
            self._handle = None

    def collective(self, op, nbytes, ranks=None, elem_bytes=4, concurrent=True, root=0, algorithm=None, channels=0,
                   chunk_bytes=0):
        """{time_us, algorithm, channels, chunk_bytes, algbw_gbs, busbw_gbs} of `op` on `nbytes` (nccl-tests'
        size: the whole buffer) over the job ranks `ranks` (None: all); with concurrent, every group of this
        shape runs at the same time and they share the NICs. `algorithm` forces one ("ring"), or takes
        LOOM_ALGO's rules by collective and size ("allreduce:0-64K:oneshot,64K-:ring")."""
        if op not in _COLLECTIVES:
            raise ValueError(f"CollectiveModel: unknown collective {op!r} ({', '.join(_COLLECTIVES)})")
        array, count = _int_array(ranks) if ranks is not None else (None, 0)
        request = _Request(_COLLECTIVES[op], int(nbytes), int(elem_bytes), array, count, int(bool(concurrent)),
                           int(root), algorithm.encode() if algorithm else None, int(channels), int(chunk_bytes))
        out = _Prediction()
        _call("loomModelPredict", self._handle, ctypes.byref(request), ctypes.byref(out))
        return {"time_us": out.timeUs, "algorithm": out.algorithm.decode(), "channels": out.channels,
                "chunk_bytes": out.chunkBytes, "algbw_gbs": out.algbwGbs, "busbw_gbs": out.busbwGbs,
                **({"note": out.note.decode()} if out.note else {})}

    def p2p(self, nbytes, pairs, elem_bytes=4, concurrent=True):
        """Microseconds until every (src, dst) pair's message of `nbytes` arrived, all sent at once."""
        pairs = list(pairs)
        srcs, n = _int_array(a for a, _ in pairs)
        dsts, _ = _int_array(b for _, b in pairs)
        us = ctypes.c_double()
        _call("loomModelPointToPoint", self._handle, int(nbytes), srcs, dsts, n, int(elem_bytes), int(bool(concurrent)),
              ctypes.byref(us))
        return us.value

    def machine(self, ranks=None, concurrent=True):
        """The machine model the group `ranks` (None: all) is timed on, as a dict."""
        array, count = _int_array(ranks) if ranks is not None else (None, 0)
        m = _Machine()
        _call("loomModelGetMachine", self._handle, array, count, int(bool(concurrent)), ctypes.byref(m))
        return {"nranks": m.nranks, "ranks_per_node": m.ranksPerNode, "intra_gbs": m.intraGbs,
                "latency_us": m.latencyUs, "nics_per_node": m.nicsPerNode, "nic_gbs": m.nicGbs,
                "net_latency_us": m.netLatencyUs, "step_us": m.stepUs, "launch_us": m.launchUs,
                "copy_gbs": m.copyGbs, "memory": "device" if m.device else "host", "max_channels": m.maxChannels}
