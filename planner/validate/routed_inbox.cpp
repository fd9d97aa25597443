#include "planner/validate/routed_inbox.hpp"

#include <algorithm>

#include "planner/core/error.hpp"

namespace peerplan {

RoutedInbox::RoutedInbox(std::vector<Request> requests, RouterPolicy policy, int copies)
    : requests_(std::move(requests)),
      router_(policy, copies),
      outstanding_(size_t(std::max(1, copies)), 0),
      queued_(size_t(std::max(1, copies))) {
  std::stable_sort(requests_.begin(), requests_.end(), [](const Request& a, const Request& b) {
    return a.arrival_s < b.arrival_s || (a.arrival_s == b.arrival_s && a.id < b.id);
  });
  routed_.reserve(requests_.size());
}

void RoutedInbox::route_until(double now) {
  while (next_ < requests_.size() && requests_[next_].arrival_s <= now) {
    const Request& r = requests_[next_++];
    const int c = router_.pick(r, outstanding_);
    ++outstanding_[size_t(c)];
    queued_[size_t(c)].push_back(r);
    routed_.emplace_back(r.id, c);
  }
}

std::vector<Request> RoutedInbox::take(int copy, double now) {
  if (copy < 0 || copy >= copies()) throw RuntimeError("routed inbox: no copy " + std::to_string(copy));
  std::lock_guard<std::mutex> lock(mu_);
  route_until(now);
  std::vector<Request> out;
  out.swap(queued_[size_t(copy)]);
  return out;
}

std::optional<double> RoutedInbox::next_arrival() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (next_ >= requests_.size()) return std::nullopt;
  return requests_[next_].arrival_s;
}

void RoutedInbox::finished(int copy) {
  std::lock_guard<std::mutex> lock(mu_);
  if (copy >= 0 && copy < copies() && outstanding_[size_t(copy)] > 0) --outstanding_[size_t(copy)];
}

bool RoutedInbox::drained(int copy) const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ >= requests_.size() && queued_[size_t(copy)].empty();
}

std::vector<std::pair<int64_t, int>> RoutedInbox::routed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routed_;
}

}  // namespace peerplan
