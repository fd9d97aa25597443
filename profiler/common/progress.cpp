#include "profiler/common/progress.hpp"

#include <algorithm>
#include <cmath>
#include <unistd.h>

#include <fmt/format.h>

namespace peerplan::profiler {

double eta_seconds(double est_done, double actual_done, double est_remaining) {
  double scale = (est_done > 0 && actual_done > 0) ? actual_done / est_done : 1.0;
  return std::max(0.0, est_remaining * scale);
}

std::string render_progress(double fraction, const std::string& what, double elapsed_s, double eta_s, int w) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  int filled = int(std::lround(fraction * w));
  std::string bar = std::string(size_t(filled), '#') + std::string(size_t(w - filled), '.');
  return fmt::format("[{}] {:3.0f}%  {:<40.40}  elapsed {:.0f}s  ETA {:.0f}s", bar, fraction * 100, what, elapsed_s, eta_s);
}

Progress::Progress(bool enabled, double total_est)
    : enabled_(enabled), total_est_(std::max(total_est, 1e-9)), start_(clock::now()), cur_start_(start_), tty_(isatty(2)) {}

double Progress::elapsed() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

void Progress::begin(const std::string& name, double est) {
  cur_name_ = name;
  cur_est_ = est;
  cur_frac_ = 0;
  cur_detail_.clear();
  cur_start_ = clock::now();
  draw(true);
}

void Progress::update(double f, const std::string& detail) {
  cur_frac_ = std::clamp(f, 0.0, 1.0);
  cur_detail_ = detail;
  draw(false);
}

void Progress::end() {
  est_done_ += cur_est_;
  actual_done_ += std::chrono::duration<double>(clock::now() - cur_start_).count();
  cur_est_ = 0;
  cur_frac_ = 0;
}

void Progress::draw(bool force) {
  if (!enabled_) return;
  auto now = clock::now();
  // Not a terminal (a log file): one line per measurement instead of a redrawn bar.
  if (!tty_) {
    if (force) std::fprintf(stderr, "profile: %s (elapsed %.1fs)\n", cur_name_.c_str(), elapsed());
    return;
  }
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double est_total_scaled = std::max(total_est_, est_done_ + cur_est_);
  double done = est_done_ + cur_est_ * cur_frac_;
  double eta = eta_seconds(est_done_, actual_done_, est_total_scaled - done);
  std::string what = cur_name_ + (cur_detail_.empty() ? "" : " " + cur_detail_);
  std::fprintf(stderr, "\r%s\x1b[K", render_progress(done / est_total_scaled, what, elapsed(), eta).c_str());
  std::fflush(stderr);
}

void Progress::message(const std::string& line) {
  if (!enabled_) return;
  if (tty_) std::fprintf(stderr, "\r\x1b[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  draw(true);
}

void Progress::finish() {
  if (enabled_ && tty_) std::fprintf(stderr, "\r\x1b[K");
}

}  // namespace peerplan::profiler
