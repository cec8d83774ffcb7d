// The worker pool behind the runtime's parallel loops.
#include "ssm/thread_pool.h"

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

void ThreadPool::work(TaskFn fn, void* ctx, int64_t n) {
  for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) {
    try {
      fn(ctx, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_)
        error_ = std::current_exception();
    }
  }
}

void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
  if (n <= 0)
    return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i)
      fn(ctx, i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    busy_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  work(fn, ctx, n);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return busy_ == 0; });
    error = error_;
    error_ = nullptr;
  }
  if (error)
    std::rethrow_exception(error);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    TaskFn fn;
    void* ctx;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      fn = fn_;
      ctx = ctx_;
      n = n_;
    }
    work(fn, ctx, n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_cv_.notify_one();
  }
}

int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

} // namespace ssm
