"""Tests of the harness's frame protocol: tensors cross a socket with one
copy each way and arrive as they were when they were packed."""
import os
import socket
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "verifier_worker", "harness"))
import torch  # noqa: E402

from kforge_harness import protocol  # noqa: E402


def _roundtrip(header, payload):
    left, right = socket.socketpair()
    try:
        # A sender thread: a payload above the socket buffer must not block.
        sender = threading.Thread(target=protocol.send_frame, args=(left, header, payload))
        sender.start()
        got = protocol.recv_frame(right)
        sender.join()
        return got
    finally:
        left.close()
        right.close()


class TensorFramesTest(unittest.TestCase):
    def test_tensors_of_every_carried_dtype_arrive_equal(self):
        tensors = {
            "f32": torch.randn(512, 1024),
            "bf16": torch.randn(33, 7).to(torch.bfloat16),
            "bool": torch.rand(100) > 0.5,
            "i64": torch.arange(10),
            "strided": torch.randn(64, 64).t(),
            "empty": torch.empty(0),
        }
        packer = protocol.TensorPacker()
        for name, t in tensors.items():
            packer.add(name, t)
        header, payload = _roundtrip({"type": "t", "tensors": packer.entries}, packer.payload())
        out = protocol.unpack_tensors(header["tensors"], payload)
        for name, t in tensors.items():
            self.assertEqual(out[name].dtype, t.dtype, name)
            self.assertTrue(torch.equal(out[name], t), name)

    def test_what_is_sent_is_the_tensor_as_it_was_when_packed(self):
        # A candidate that returns one buffer from every call and rewrites
        # it must not change the outputs of a call already packed.
        t = torch.zeros(1000)
        packer = protocol.TensorPacker()
        packer.add("first", t)
        t.fill_(7.0)
        packer.add("second", t)
        header, payload = _roundtrip({"tensors": packer.entries}, packer.payload())
        out = protocol.unpack_tensors(header["tensors"], payload)
        self.assertTrue(torch.equal(out["first"], torch.zeros(1000)))
        self.assertTrue(torch.equal(out["second"], torch.full((1000,), 7.0)))

    def test_received_tensors_are_writable_and_do_not_overlap(self):
        packer = protocol.TensorPacker()
        packer.add("a", torch.ones(16))
        packer.add("b", torch.ones(16))
        header, payload = _roundtrip({"tensors": packer.entries}, packer.payload())
        out = protocol.unpack_tensors(header["tensors"], payload)
        out["a"].mul_(3)  # an input mutated in place by a candidate
        self.assertTrue(torch.equal(out["b"], torch.ones(16)))
        self.assertTrue(torch.equal(out["a"], torch.full((16,), 3.0)))

    def test_a_read_only_buffer_is_copied_not_shared(self):
        data = torch.arange(4, dtype=torch.float32).numpy().tobytes()
        t = protocol.tensor_from_bytes(data, "float32", [4])
        t.add_(1)
        self.assertEqual(list(t), [1.0, 2.0, 3.0, 4.0])


if __name__ == "__main__":
    unittest.main()


def _sealed_memfd(data):
    """A memfd holding `data`, sealed read-only as the verifier seals a
    set's inputs."""
    import fcntl
    fd = os.memfd_create("kforge-test-inputs", os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    return fd


class SharedBuffersTest(unittest.TestCase):
    def test_shared_inputs_arrive_equal_and_writing_them_leaves_the_buffer_alone(self):
        x = torch.randn(300, 17)
        flags = torch.rand(40) > 0.5
        packer = protocol.TensorPacker()
        packer.add("s/in0", x)
        packer.add("s/in1", flags)
        fd = _sealed_memfd(b"".join(bytes(p) for p in packer.payload()))
        try:
            entries = [dict(e, buffer=0) for e in packer.entries]
            out = protocol.unpack_shared(entries, [fd])
            self.assertTrue(torch.equal(out["s/in0"], x))
            self.assertTrue(torch.equal(out["s/in1"], flags))
            # A candidate writing into its inputs writes its own pages.
            out["s/in0"].fill_(5.0)
            again = protocol.unpack_shared(entries, [fd])
            self.assertTrue(torch.equal(again["s/in0"], x))
        finally:
            os.close(fd)

    def test_a_shared_tensor_outside_its_buffer_is_a_protocol_error(self):
        fd = _sealed_memfd(b"\0" * 64)
        try:
            entry = {"name": "s/in0", "dtype": "float32", "shape": [32], "buffer": 0,
                     "offset": 0, "nbytes": 128}
            with self.assertRaises(protocol.ProtocolError):
                protocol.unpack_shared([entry], [fd])
            with self.assertRaises(protocol.ProtocolError):
                protocol.unpack_shared([dict(entry, nbytes=64, buffer=1)], [fd])
        finally:
            os.close(fd)

    def test_a_reply_that_fits_goes_into_the_offered_buffer_and_is_unmapped(self):
        import fcntl
        named = [("run0/out0", torch.randn(64, 9)), ("run0/out1", torch.arange(5)),
                 ("after/in0", torch.randn(3).to(torch.bfloat16))]
        capacity = sum(t.numel() * t.element_size() for _, t in named)
        fd = os.memfd_create("kforge-test-reply", os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, capacity)
            entries, parts, in_buffer = protocol.pack_reply(named, (fd, capacity))
            self.assertTrue(in_buffer)
            self.assertEqual(parts, [])
            # Unmapped: the verifier's seal is not refused.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
            data = os.pread(fd, capacity, 0)
            out = protocol.unpack_tensors(entries, bytearray(data))
            for name, t in named:
                self.assertTrue(torch.equal(out[name], t), name)
        finally:
            os.close(fd)

    def test_a_writer_fills_the_buffer_in_order_and_stops_at_its_end(self):
        # The reference server's epoch: sets written one after another; the
        # one that does not fit raises, and the server makes them again as a
        # payload.
        import fcntl
        fd = os.memfd_create("kforge-test-epoch", os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, 1000)
            writer = protocol.BufferWriter(fd, 1000)
            a, b = torch.arange(50, dtype=torch.float32), torch.ones(3, 4, dtype=torch.bool)
            writer.add("s/in0", a)
            writer.add("s/out0", b)
            with self.assertRaises(protocol.BufferFull):
                writer.add("t/in0", torch.zeros(300))
            writer.close()
            self.assertEqual([e["offset"] for e in writer.entries], [0, 200])
            self.assertEqual(writer.size, 212)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)  # unmapped by close()
            out = protocol.unpack_tensors(writer.entries, bytearray(os.pread(fd, writer.size, 0)))
            self.assertTrue(torch.equal(out["s/in0"], a))
            self.assertTrue(torch.equal(out["s/out0"], b))
        finally:
            os.close(fd)

    def test_a_reply_larger_than_the_offer_travels_as_a_payload(self):
        named = [("run0/out0", torch.randn(100))]
        fd = os.memfd_create("kforge-test-reply", os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, 100)
            entries, parts, in_buffer = protocol.pack_reply(named, (fd, 100))
            self.assertFalse(in_buffer)
            out = protocol.unpack_tensors(entries, bytearray(b"".join(bytes(p) for p in parts)))
            self.assertTrue(torch.equal(out["run0/out0"], named[0][1]))
        finally:
            os.close(fd)
