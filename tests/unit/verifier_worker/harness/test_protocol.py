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
