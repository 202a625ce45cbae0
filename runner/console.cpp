#include "runner/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

BatchConsole::BatchConsole(std::FILE* out) : out_(out), terminal_(isatty(fileno(out)) == 1) {}

BatchConsole::~BatchConsole() { finish(); }

void BatchConsole::start_run(int index, int total, const std::string& name) {
  std::lock_guard lock(mutex_);
  index_ = index;
  total_ = total;
  name_ = name;
  has_progress_ = false;
  run_start_ = Clock::now();
  line(fmt::format("> run {}/{}: {}", index, total, name));
}

void BatchConsole::end_run(double seconds) {
  std::lock_guard lock(mutex_);
  ++runs_done_;
  seconds_done_ += seconds;
}

void BatchConsole::line(const std::string& text) {
  std::lock_guard lock(mutex_);
  clear();
  fmt::print(out_, "{}\n", text);
  draw();
}

void BatchConsole::progress(const TrainingProgress& progress) {
  std::lock_guard lock(mutex_);
  last_ = progress;
  has_progress_ = true;
  if (!terminal_) {
    fmt::print(out_, "{}\n", progress.line);
    std::fflush(out_);
    return;
  }
  clear();
  draw();
}

void BatchConsole::finish() {
  std::lock_guard lock(mutex_);
  clear();
}

// "[run 7/42] resnet/bf16 | epoch 2/3 | step 120/192 | loss 0.4123 | 2890 samples/s | ETA 12s,
// batch 5m 10s". The batch's ETA: this run's, plus the runs left at the mean time of those done
// (or of this one, projected, before any is done).
std::string BatchConsole::status_text() const {
  std::string text = fmt::format("[run {}/{}] {}", index_, total_, name_);
  if (!has_progress_) return text + " | starting";
  text += fmt::format(" | epoch {}/{} | step {}/{} | loss {:.4f} | {} | ETA {}", last_.epoch,
                      last_.epochs, last_.step, last_.total_steps, last_.loss,
                      format_rate(last_.samples_per_s, last_.tokens_per_sample),
                      format_duration(last_.eta_seconds));
  const int left = total_ - index_;
  if (left <= 0) return text;
  const double this_run =
      std::chrono::duration<double>(Clock::now() - run_start_).count() + last_.eta_seconds;
  const double per_run = runs_done_ > 0 ? seconds_done_ / runs_done_ : this_run;
  return text + fmt::format(", batch {}", format_duration(last_.eta_seconds + left * per_run));
}

size_t terminal_width(std::FILE* out) {
  winsize size{};
  if (!isatty(fileno(out)) || ioctl(fileno(out), TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

void BatchConsole::draw() {
  if (!terminal_ || index_ == 0) return;
  std::string text = status_text();
  // One line, or the next redraw would clear only its last part: cut to the terminal's width.
  const size_t width = terminal_width(out_);
  if (width > 1 && text.size() >= width) text.resize(width - 1);
  fmt::print(out_, "{}", text);
  std::fflush(out_);
  drawn_ = true;
}

void BatchConsole::clear() {
  if (!drawn_) return;
  fmt::print(out_, "\r\033[K");  // to the line's start, erase it
  drawn_ = false;
}

}  // namespace trainyard
