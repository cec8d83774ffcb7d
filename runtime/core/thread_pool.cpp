// The worker pool behind the runtime's parallel loops.
#include "core/thread_pool.h"

#include <algorithm>

namespace ssm {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_)
    w.join();
}

void ThreadPool::work(uint32_t gen, TaskFn fn, void* ctx, int64_t n) {
  const uint64_t tag = static_cast<uint64_t>(gen) << 32;
  uint64_t v = next_.load(std::memory_order_relaxed);
  for (;;) {
    if ((v & ~0xFFFFFFFFull) != tag || static_cast<int64_t>(v & 0xFFFFFFFFull) >= n)
      return;
    if (!next_.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      continue;
    try {
      fn(ctx, static_cast<int64_t>(v & 0xFFFFFFFFull));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_)
        error_ = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      std::lock_guard<std::mutex> lock(mutex_); // pairs with the wait in run()
      done_cv_.notify_all();
    }
    v = next_.load(std::memory_order_relaxed);
  }
}

void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
  if (n <= 0)
    return;
  if (workers_.empty() || n == 1 || n > 0xFFFFFFFFll) {
    std::exception_ptr error; // as in the pooled case: run every task, rethrow the first error
    for (int64_t i = 0; i < n; ++i) {
      try {
        fn(ctx, i);
      } catch (...) {
        if (!error)
          error = std::current_exception();
      }
    }
    if (error)
      std::rethrow_exception(error);
    return;
  }
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gen = ++generation_;
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    next_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  }
  start_cv_.notify_all();
  work(gen, fn, ctx, n);
  // Only unfinished tasks are waited for: workers that have not woken up yet are not.
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == n; });
    error = error_;
    error_ = nullptr;
  }
  if (error)
    std::rethrow_exception(error);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen;
    TaskFn fn;
    void* ctx;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = gen = generation_;
      fn = fn_;
      ctx = ctx_;
      n = n_;
    }
    work(gen, fn, ctx, n);
  }
}

void run_independent(int64_t n, int threads, const std::function<void(int64_t)>& f) {
  std::atomic<int64_t> next{1};
  std::mutex failure_lock;
  std::exception_ptr failure;
  auto worker = [&](int64_t first) {
    for (int64_t k = first; k < n; k = next++) {
      try {
        f(k);
      } catch (...) { // ssm::Error, std::bad_alloc: rethrown after every thread has joined
        const std::lock_guard<std::mutex> lock(failure_lock);
        if (!failure)
          failure = std::current_exception();
      }
    }
  };
  const int64_t workers = std::min<int64_t>(n, std::max(1, threads));
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < workers; ++w)
    pool.emplace_back(worker, next++);
  worker(0);
  for (std::thread& t : pool)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
}

int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

} // namespace ssm
