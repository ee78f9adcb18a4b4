// RingQueue: a FIFO over one power-of-two array that only grows. Used by the
// transports (self, shm, tcp) for posted operations: push/pop never allocate
// once the queue has reached its working size (growth doubles, so it is
// amortized), unlike std::deque which allocates a block every few hundred
// pushes.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace weft {

template <class T>
class RingQueue {
 public:
  explicit RingQueue(size_t initialCapacity = 16) {
    size_t cap = 1;
    while (cap < initialCapacity) cap <<= 1;
    buf_.resize(cap);
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // i-th element from the front (0 = front).
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  T& front() { return buf_[head_]; }
  T& back() { return (*this)[size_ - 1]; }

  void push_back(const T& v) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

 private:
  void grow() {
    std::vector<T> next(buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) next[i] = std::move((*this)[i]);
    buf_.swap(next);
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace weft
