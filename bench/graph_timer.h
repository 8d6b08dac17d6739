// Timing of GPU work as a decode step runs it: captured once in a CUDA
// graph, replayed. For the benchmarks in bench/ (a CUDA build).
#ifndef KFORGE_BENCH_GRAPH_TIMER_H_
#define KFORGE_BENCH_GRAPH_TIMER_H_

#include <functional>

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace kforge {

// Microseconds per call of call(0..calls-1), replayed from one CUDA graph
// after an eager warm-up (lazy initialisations must not be captured).
inline double GraphedMicroseconds(int calls, const std::function<void(int)>& call) {
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool();
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    for (int i = 0; i < calls; ++i) call(i);
    stream.synchronize();
  }
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    graph.capture_begin();
    for (int i = 0; i < calls; ++i) call(i);
    graph.capture_end();
  }
  for (int i = 0; i < 3; ++i) graph.replay();
  at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
  const int reps = 20;
  start.record();
  for (int i = 0; i < reps; ++i) graph.replay();
  end.record();
  end.synchronize();
  return start.elapsed_time(end) * 1e3 / reps / calls;
}

}  // namespace kforge

#endif  // KFORGE_BENCH_GRAPH_TIMER_H_
