"""Timing of GPU work as a decode step runs it, for the Python probes in
bench/: captured once in a CUDA graph, replayed (the C++ side is
bench/graph_timer.h)."""
import torch


def graphed_us(fn, calls, reps=20):
    """Microseconds per call of fn(0..calls-1), replayed from one CUDA graph
    after an eager warm-up on the capture stream."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps / calls * 1e3
