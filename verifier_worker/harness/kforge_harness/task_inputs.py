"""Loading a KernelBench-style task and making its input sets.

Runs only in trusted processes (the reference server). A task module defines
`Model`, `get_inputs()`, `get_init_inputs()` and module-level size constants
that those functions read. Input sets vary values (distributions, scale,
secret seeds) and sizes (tiny, larger, ragged, batch 1) by rewriting the size
constants for the duration of the call; constants that `get_init_inputs`
reads change the model too, so both models are rebuilt from the reported
init inputs.
"""

import contextlib
import math
import random
import types

import torch

# Size constants below this are treated as hyper-parameters (kernel sizes,
# reduction dims, channel counts of 3) and never rescaled.
MIN_SCALABLE_SIZE = 16


def load_task(source, name="kforge_task"):
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, required):
            raise ValueError(f"task defines no {required}")
    return module


def _referenced_globals(fn):
    names = set(fn.__code__.co_names)
    for const in fn.__code__.co_consts:
        if isinstance(const, types.CodeType):
            names |= set(const.co_names)
    return names


def size_constants(module):
    """{name: (value, is_init)} for int / tuple-of-int module globals the
    input functions read."""
    shape_names = _referenced_globals(module.get_inputs)
    init_names = _referenced_globals(module.get_init_inputs)
    found = {}
    for name in shape_names | init_names:
        value = module.__dict__.get(name)
        is_int = isinstance(value, int) and not isinstance(value, bool)
        is_int_tuple = isinstance(value, tuple) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)
        if is_int or is_int_tuple:
            found[name] = (value, name in init_names)
    return found


def _rescale(value, scale, ragged):
    if isinstance(value, tuple):
        return tuple(_rescale(v, scale, ragged) for v in value)
    if value < MIN_SCALABLE_SIZE:
        return value
    n = max(2, int(round(value * scale)))
    if ragged and n % 2 == 0:
        n += 1  # odd: not a multiple of any power-of-two tile
    return n


def overridden_constants(module, spec):
    """The size constants this input set changes, {name: new value}."""
    changes = {}
    for name, (value, _is_init) in size_constants(module).items():
        new = value
        if spec.get("batch_one") and "batch" in name.lower() and isinstance(value, int):
            new = 1
        elif spec.get("size_scale", 1.0) != 1.0 or spec.get("ragged"):
            new = _rescale(value, spec.get("size_scale", 1.0), spec.get("ragged", False))
        if new != value:
            changes[name] = new
    return changes


def _heavy_tailed(like, generator):
    # Signed Pareto (alpha 3): rare large magnitudes, which a kernel that
    # only works on [0, 1) inputs gets wrong.
    u = torch.rand(like.shape, generator=generator, dtype=torch.float64,
                   device=like.device).clamp_min(1e-12)
    sign = torch.randint(0, 2, like.shape, generator=generator, dtype=torch.int8,
                         device=like.device) * 2 - 1
    return ((u.pow(-1.0 / 3.0) - 1.0) * sign).to(like.dtype)


def _redistribute(tensor, distribution, generator):
    if not tensor.is_floating_point() or distribution in ("", "task"):
        return tensor
    if distribution == "normal":
        return torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype,
                           device=tensor.device)
    if distribution == "uniform":
        return torch.rand(tensor.shape, generator=generator, dtype=tensor.dtype,
                          device=tensor.device) * 2 - 1
    if distribution == "heavy_tailed":
        return _heavy_tailed(tensor, generator)
    raise ValueError(f"unknown distribution {distribution!r}")


def _tensor_bytes(values):
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def _set_bytes(module, spec):
    """Bytes of the inputs and outputs `spec` would make, without making
    them where torch can build tensors on the meta device (torch 2.x): the
    model runs there on shapes alone. Outputs can dwarf inputs (a matmul
    with a small inner dimension: two 8 MB inputs, a 4 GB output), so they
    are counted, not assumed; where the meta run fails (an op without a
    meta kernel, a data-dependent shape) they are taken to be as large as
    the inputs."""
    changes = overridden_constants(module, spec)
    saved = {name: module.__dict__[name] for name in changes}
    module.__dict__.update(changes)
    try:
        torch.manual_seed(0)
        if not hasattr(torch, "get_default_device"):
            return 2 * _tensor_bytes(module.get_inputs())
        with torch.device("meta"):
            inputs = module.get_inputs()
            in_bytes = _tensor_bytes(inputs)
            try:
                with torch.no_grad():
                    model = module.Model(*module.get_init_inputs())
                    out_bytes = _tensor_bytes(as_output_list(model(*inputs)))
            except Exception:  # noqa: BLE001 - any failure means "unknown"
                out_bytes = in_bytes
        return in_bytes + out_bytes
    finally:
        module.__dict__.update(saved)


def model_bytes(module, spec):
    """Bytes of the parameters and buffers of the task's Model built with
    `spec`'s size constants, counted on the meta device (nothing is
    allocated); 0 where torch has no device contexts (1.x) or the build
    fails there."""
    if not hasattr(torch, "get_default_device"):
        return 0
    changes = overridden_constants(module, spec)
    saved = {name: module.__dict__[name] for name in changes}
    module.__dict__.update(changes)
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
        return _tensor_bytes(list(model.parameters()) + list(model.buffers()))
    except Exception:  # noqa: BLE001 - unknown: the build on the device decides
        return 0
    finally:
        module.__dict__.update(saved)


def fit_to_budget(module, spec, max_bytes):
    """`spec`, with its size constants scaled down until inputs and (about as
    many bytes of) outputs fit `max_bytes`. Records the factor as fit_scale."""
    spec = dict(spec)
    factor = 1.0
    for _ in range(40):
        if _set_bytes(module, spec) <= max_bytes:
            break
        factor *= 0.5
        spec["size_scale"] = spec.get("size_scale", 1.0) * 0.5
    spec["fit_scale"] = factor
    return spec


def _on(device):
    """A context in which the task's factory calls (torch.rand, ...) make
    their tensors on `device`: on a GPU, drawing a KernelBench input of
    gigabytes takes milliseconds there against seconds on the host. Torch
    1.x (no device contexts) draws on the host."""
    if device is None or str(device) == "cpu" or not hasattr(torch, "get_default_device"):
        return contextlib.nullcontext()
    return torch.device(device)


def make_inputs(module, spec, device=None):
    """(init_inputs, inputs, changed constants) for one input set spec:
    {name, seed, distribution, value_scale, size_scale, ragged, batch_one,
    dtype}. With `device` the values are drawn there (the same seed draws
    the same values on the same device and library versions)."""
    changes = overridden_constants(module, spec)
    saved = {name: module.__dict__[name] for name in changes}
    module.__dict__.update(changes)
    try:
        torch.manual_seed(int(spec["seed"]))
        with _on(device):
            inputs = list(module.get_inputs())
        init_inputs = list(module.get_init_inputs())
    finally:
        module.__dict__.update(saved)
    generator = None
    scale = float(spec.get("value_scale", 1.0))
    dtype = spec.get("dtype") or ""
    out = []
    scalar_rng = random.Random(int(spec["seed"]) + 2)
    for x in inputs:
        if isinstance(x, float) and spec.get("name") != "task_inputs":
            # A plain-number input (a scale factor) varies like the tensors
            # do, within a factor of two, so a kernel that hard-codes the
            # task's own value is wrong on the other sets.
            x = x * 2.0 ** scalar_rng.uniform(-1.0, 1.0)
        if isinstance(x, torch.Tensor):
            if generator is None:
                generator = torch.Generator(device=x.device).manual_seed(int(spec["seed"]) + 1)
            x = _redistribute(x, spec.get("distribution", "task"), generator)
            if scale != 1.0 and x.is_floating_point():
                x = x * scale
            if dtype and x.is_floating_point():
                x = x.to(getattr(torch, dtype))
        out.append(x)
    return init_inputs, out, changes


def encode_init_inputs(values):
    """Init inputs as JSON: numbers, strings, None, lists; tuples tagged."""
    def enc(v):
        if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            return {"__float__": repr(v)}
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        raise ValueError(f"init input of type {type(v).__name__} cannot be passed on")
    return [enc(v) for v in values]


def encode_scalar(value):
    """[value, type] for a plain-number input: JSON alone would turn 2.0
    into 2, and the candidate must get what the reference got."""
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
    return [value, kind]


def decode_scalar(encoded):
    value, kind = encoded[0], encoded[1] if len(encoded) > 1 else "float"
    return {"bool": bool, "int": int}.get(kind, float)(value)


def decode_init_inputs(values):
    def dec(v):
        if isinstance(v, dict) and "__tuple__" in v:
            return tuple(dec(x) for x in v["__tuple__"])
        if isinstance(v, dict) and "__float__" in v:
            return float(v["__float__"])
        if isinstance(v, list):
            return [dec(x) for x in v]
        return v
    return [dec(v) for v in values]


def as_output_list(result):
    """Model outputs as a list of tensors (a tensor, or a tuple/list of them)."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]
