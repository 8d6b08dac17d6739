"""Framed messages between the C++ verifier and the harness processes.

A frame is: magic b"KFRM", u32 header length, u64 payload length (little
endian), a UTF-8 JSON header, then the payload. Tensors travel in the payload
as raw little-endian bytes described by the header's "tensors" list
(name, dtype, shape, offset, nbytes); nothing is ever pickled.

Large tensors need not cross the socket at all. A request may name tensors
in "shared_tensors" (name, dtype, shape, buffer, offset, nbytes): their bytes
lie in a sealed memfd whose descriptor came with the frame (`buffer` is its
index among the frame's descriptors), mapped here copy-on-write. And a
request may offer a "reply_buffer" (a descriptor index) of "reply_capacity"
bytes: a reply whose tensors fit is written there (a GPU tensor copied once,
straight into it) and says "payload_in_reply_buffer"; the verifier seals the
buffer before it reads a byte.

The C++ twin is verifier_worker/sandbox/frame_channel.{h,cc}.
"""

import array
import json
import mmap
import os
import socket
import struct

MAGIC = b"KFRM"
_PREFIX = struct.Struct("<4sIQ")
# A header larger than this is a protocol error, not a message.
MAX_HEADER_BYTES = 64 << 20


class ProtocolError(Exception):
    pass


def _recv_exact(sock, n, fds=None):
    """n bytes; without fds, straight into one writable buffer (a payload of
    hundreds of MB is copied once, by the kernel, and the tensors made from
    it share it)."""
    if fds is None:
        buf = bytearray(n)
        view = memoryview(buf)
        pos = 0
        while pos < n:
            got = sock.recv_into(view[pos:], min(n - pos, 1 << 24))
            if not got:
                raise EOFError("peer closed the channel")
            pos += got
        return buf
    chunks = []
    while n > 0:
        if fds is not None:
            data, ancdata, _flags, _addr = sock.recvmsg(min(n, 1 << 20), socket.CMSG_SPACE(16 * 4))
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(cdata[: len(cdata) - (len(cdata) % received.itemsize)])
                    fds.extend(received)
        else:
            data = sock.recv(min(n, 1 << 20))
        if not data:
            raise EOFError("peer closed the channel")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def recv_frame(sock, want_fds=False):
    """Returns (header dict, payload bytes[, fds])."""
    fds = [] if want_fds else None
    magic, header_len, payload_len = _PREFIX.unpack(_recv_exact(sock, _PREFIX.size, fds))
    if magic != MAGIC or header_len > MAX_HEADER_BYTES:
        raise ProtocolError("bad frame prefix")
    header = json.loads(_recv_exact(sock, header_len, fds).decode("utf-8"))
    payload = _recv_exact(sock, payload_len) if payload_len else b""
    if want_fds:
        return header, payload, fds
    return header, payload


def send_frame(sock, header, payload=b"", fds=None):
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    parts = payload if isinstance(payload, (list, tuple)) else [payload]
    prefix = _PREFIX.pack(MAGIC, len(body), sum(len(p) for p in parts))
    if fds:
        sock.sendmsg([prefix + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.sendall(prefix + body)
    for part in parts:
        if len(part):
            sock.sendall(part)


# --- tensors as raw bytes -------------------------------------------------

# Filled in place on first use, never rebound: the harness's modules are
# guarded whole (guards.py).
_DTYPE_NAMES = {}


def _dtype_names():
    if not _DTYPE_NAMES:
        import torch
        _DTYPE_NAMES.update({
            torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.float64: "float64", torch.int64: "int64", torch.int32: "int32",
            torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
        })
    return _DTYPE_NAMES


def dtype_name(dtype):
    name = _dtype_names().get(dtype)
    if name is None:
        raise ProtocolError(f"unsupported dtype {dtype}")
    return name


def dtype_from_name(name):
    for dtype, known in _dtype_names().items():
        if known == name:
            return dtype
    raise ProtocolError(f"unknown dtype {name!r}")


def tensor_bytes(tensor):
    """Raw little-endian bytes of a tensor, as a buffer over a contiguous
    CPU copy taken now: one copy (the device-to-host one on a GPU), and what
    the tensor's owner writes into it later does not change what is sent."""
    import torch
    # torch's detach itself, not the tensor's attribute (an attribute of a
    # candidate's tensor shadows the method for it alone); the result is
    # the harness's own object.
    t = torch.Tensor.detach(tensor)
    t = t.contiguous().cpu() if t.device.type != "cpu" else t.clone(memory_format=torch.contiguous_format)
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return memoryview(t.numpy()).cast("B")


def tensor_from_bytes(data, dtype_str, shape, device="cpu"):
    """A tensor over `data` itself where it is writable (a received
    payload), else over a copy."""
    import torch
    dtype = dtype_from_name(dtype_str)
    carrier = {torch.bfloat16: torch.int16, torch.bool: torch.uint8}.get(dtype, dtype)
    if len(data) and memoryview(data).readonly:
        data = bytearray(data)
    t = torch.frombuffer(data, dtype=carrier) if len(data) else torch.empty(0, dtype=carrier)
    if carrier is not dtype:
        t = t.view(dtype) if dtype is torch.bfloat16 else t.to(dtype)
    return t.reshape(shape).to(device)


class TensorPacker:
    """Collects named tensors into one payload and its header entries."""

    def __init__(self):
        self.entries = []
        self.parts = []
        self.size = 0

    def add(self, name, tensor):
        data = tensor_bytes(tensor)
        self.entries.append({"name": name, "dtype": dtype_name(tensor.dtype),
                             "shape": list(tensor.shape), "offset": self.size, "nbytes": len(data)})
        self.parts.append(data)
        self.size += len(data)

    def payload(self):
        """The parts, for send_frame to send one after another."""
        return list(self.parts)


def unpack_tensors(entries, payload, device="cpu"):
    """{name: tensor} from header entries and a payload; on the CPU the
    tensors share the payload's memory (each its own range of it)."""
    out = {}
    view = memoryview(payload)
    for e in entries:
        chunk = view[e["offset"]: e["offset"] + e["nbytes"]]
        out[e["name"]] = tensor_from_bytes(chunk, e["dtype"], e["shape"], device)
    return out


# --- tensors in shared buffers --------------------------------------------

def unpack_shared(entries, fds, device="cpu"):
    """{name: tensor} for "shared_tensors" entries. Each buffer is mapped
    private and writable (copy-on-write: a candidate that writes into its
    inputs changes its own pages, never the buffer), so no byte is copied
    before the tensors are made; on a GPU the one copy is to the device.
    Not MAP_POPULATE: on a private writable mapping it faults every page in
    for writing, which copies the whole buffer first (a 64 MiB set took 75
    ms to map and read that way on the development VM, 6 ms without)."""
    maps = {}
    out = {}
    for e in entries:
        k = int(e["buffer"])
        if not 0 <= k < len(fds):
            raise ProtocolError(f"shared tensor {e['name']!r} names descriptor {k} of {len(fds)}")
        if k not in maps:
            size = os.fstat(fds[k]).st_size
            maps[k] = memoryview(mmap.mmap(fds[k], size, flags=mmap.MAP_PRIVATE,
                                           prot=mmap.PROT_READ | mmap.PROT_WRITE))
        offset, nbytes = int(e["offset"]), int(e["nbytes"])
        view = maps[k]
        if offset < 0 or nbytes < 0 or offset + nbytes > len(view):
            raise ProtocolError(f"shared tensor {e['name']!r} lies outside its buffer")
        out[e["name"]] = tensor_from_bytes(view[offset: offset + nbytes], e["dtype"], e["shape"],
                                           device)
    return out


def _raw_bytes(tensor):
    """The tensor's bytes as a flat uint8 tensor on its own device (no copy
    when it is already contiguous)."""
    import torch
    t = torch.Tensor.detach(tensor).contiguous().reshape(-1)
    return t.view(torch.uint8) if t.dtype is not torch.bool else t.to(torch.uint8)


class BufferFull(Exception):
    """A tensor did not fit what was left of an offered reply buffer."""


class BufferWriter:
    """Named tensors written one after another into an offered reply buffer
    (descriptor, capacity), each copied once, straight from its device. The
    same add/entries as TensorPacker; close() unmaps the buffer, which the
    verifier cannot seal while it is still mapped writable here."""

    def __init__(self, fd, capacity):
        self.capacity = int(capacity)
        self.buffer = mmap.mmap(fd, self.capacity, flags=mmap.MAP_SHARED,
                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.entries = []
        self.size = 0

    def add(self, name, tensor):
        import torch
        r = _raw_bytes(tensor)
        n = r.numel()
        if self.size + n > self.capacity:
            raise BufferFull(f"{name}: {n} bytes at {self.size} of a {self.capacity}-byte buffer")
        if n:
            target = torch.frombuffer(self.buffer, dtype=torch.uint8, count=n, offset=self.size)
            target.copy_(r)
            del target  # the mapping cannot close while a tensor views it
        self.entries.append({"name": name, "dtype": dtype_name(tensor.dtype),
                             "shape": list(tensor.shape), "offset": self.size, "nbytes": n})
        self.size += n

    def close(self):
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = None


def pack_reply(named, reply_buffer=None):
    """[(name, tensor)] as (header entries, payload parts, in_buffer). With
    reply_buffer = (descriptor, capacity) and room in it, the bytes are
    written into the buffer, which is unmapped before this returns (the
    verifier cannot seal a buffer still mapped writable), and the payload is
    empty; otherwise they travel as a payload (TensorPacker)."""
    import torch
    # Each through torch's detach itself: from here on the harness's own
    # tensors, whose methods no attribute of a candidate's tensor shadows.
    named = [(name, torch.Tensor.detach(t)) for name, t in named]
    # A bool travels as one byte (uint8), every other dtype as its own size.
    total = sum(t.numel() * t.element_size() for _, t in named)
    if reply_buffer is None or total == 0 or total > reply_buffer[1]:
        packer = TensorPacker()
        for name, t in named:
            packer.add(name, t)
        return packer.entries, packer.payload(), False
    writer = BufferWriter(*reply_buffer)
    try:
        for name, t in named:
            writer.add(name, t)
    finally:
        writer.close()
    return writer.entries, [], True
