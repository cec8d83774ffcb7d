// A fixed pool of worker threads running parallel loops over task indices. Callers split work
// into blocks whose boundaries do not depend on the thread count, so results are bit-identical
// whatever the number of threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ssm {

class ThreadPool {
public:
  // threads >= 1; the calling thread takes part in every loop, so threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls f(i) for every i in [0, n), in any order and on any thread; returns when all are done.
  // Rethrows the first exception a call threw. Allocates nothing.
  template <class F> void parallel_for(int64_t n, F&& f) {
    using Fn = std::remove_reference_t<F>;
    run(
        n, [](void* ctx, int64_t i) { (*static_cast<Fn*>(ctx))(i); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

private:
  using TaskFn = void (*)(void*, int64_t);
  void run(int64_t n, TaskFn fn, void* ctx);
  // Claims and runs tasks of loop `gen` until none is left.
  void work(uint32_t gen, TaskFn fn, void* ctx, int64_t n);
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  bool stop_ = false;
  // The current loop, published under mutex_.
  uint32_t generation_ = 0;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  // Next task to claim: loop generation in the high 32 bits, task index in the low 32. A worker
  // that wakes late cannot claim a task of a later loop with a stale function.
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> done_{0}; // tasks finished in the current loop
  std::exception_ptr error_;
};

// Runs f(k) for every k in [0, n) on min(n, threads) threads, task 0 on the calling thread (so
// that it may report progress), each thread taking the next task when done: for independent
// runs (chains) whose results depend on k only. Rethrows the first exception after every thread
// has joined.
void run_independent(int64_t n, int threads, const std::function<void(int64_t)>& f);

// Default thread count: all cores (at least 1).
int default_threads();
// The most threads a run starts: kMaxThreadsPerCore per core (--threads above is capped).
inline constexpr int kMaxThreadsPerCore = 4;
inline int max_threads() {
  return kMaxThreadsPerCore * default_threads();
}

} // namespace ssm
