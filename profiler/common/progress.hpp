#pragma once
// Progress bar on stderr: the running measurement, its own progress and the ETA of the whole
// profile. The ETA starts from the registry's estimates and is rescaled by how long finished
// measurements really took versus their estimates, so it corrects itself on slow or fast hosts.
#include <chrono>
#include <cstdio>
#include <string>

namespace peerplan::profiler {

// Seconds left: remaining estimate scaled by (actual / estimated) of what has finished so far.
double eta_seconds(double est_done, double actual_done, double est_remaining);

// One line, e.g. "[#######.....]  58%  p2p_ce 0->1 64 MiB   elapsed 12s  ETA 9s". Pure (tested).
std::string render_progress(double fraction, const std::string& what, double elapsed_s, double eta_s, int bar_width = 24);

class Progress {
 public:
  Progress(bool enabled, double total_estimate_s);
  void begin(const std::string& name, double estimate_s);
  void update(double fraction_of_current, const std::string& detail);  // rate-limited redraw
  void end();     // the current measurement finished
  void finish();  // clears the line
  void message(const std::string& line);  // prints a line above the bar

 private:
  using clock = std::chrono::steady_clock;
  double elapsed() const;
  void draw(bool force);
  bool enabled_;
  double total_est_, est_done_ = 0, actual_done_ = 0, cur_est_ = 0, cur_frac_ = 0;
  std::string cur_name_, cur_detail_;
  clock::time_point start_, cur_start_, last_draw_;
  bool tty_;
};

}  // namespace peerplan::profiler
