#include "server/timeline_json.h"

#include <charconv>

namespace talaria {

nlohmann::json TimelineToJson(std::string_view instance, TimePoint now, std::span<const TimelineSegment> segments,
                              const std::optional<TimelineSegment>& open) {
  nlohmann::json list = nlohmann::json::array();
  for (const TimelineSegment& s : segments) list.push_back(nlohmann::json(ToJson(s)));
  return nlohmann::json{{"instance", instance},
                        {"now_s", ToSeconds(now)},
                        {"segments", std::move(list)},
                        {"open", open ? nlohmann::json(ToJson(*open)) : nlohmann::json(nullptr)}};
}

bool ParseTimelineCursors(std::string_view query, std::size_t max, std::vector<std::uint64_t>& out,
                          std::string& error) {
  out.clear();
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.rfind("after=", 0) != 0) continue;
    std::string_view list = param.substr(6);
    while (true) {
      const auto comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
        error = "query parameter 'after': expected comma-separated segment numbers (non-negative integers), got '" +
                std::string(param.substr(6, 64)) + "'";
        return false;
      }
      if (out.size() == max) {
        error = "query parameter 'after': more cursors than the " + std::to_string(max) + " instance(s) here";
        return false;
      }
      out.push_back(v);
      if (comma == std::string_view::npos) break;
      list = list.substr(comma + 1);
    }
  }
  return true;
}

void TimelineCache::Want(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  watched_until_ = now + kWatchFor;
}

bool TimelineCache::Wanted(Clock::time_point now, std::uint64_t& after) const {
  std::lock_guard<std::mutex> lock(mu_);
  after = last_closed_;
  return now < watched_until_;
}

bool TimelineCache::Merge(const nlohmann::json& entry, Clock::time_point received) {
  if (!entry.is_object()) return false;
  const auto now = entry.find("now_s");
  const auto segments = entry.find("segments");
  const auto open = entry.find("open");
  if (now == entry.end() || !now->is_number() || segments == entry.end() || !segments->is_array() ||
      open == entry.end() || !(open->is_null() || open->is_object())) {
    return false;
  }
  for (const auto& s : *segments) {
    if (!s.is_object() || !s.contains("seq") || !s["seq"].is_number_unsigned()) return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : *segments) {
    const auto seq = s["seq"].get<std::uint64_t>();
    if (seq <= last_closed_) continue;  // already have it (a poll answered twice)
    last_closed_ = seq;
    if (segments_.size() == kKept) segments_.pop_front();
    segments_.push_back(s);
  }
  open_ = *open;
  now_s_ = now->get<double>();
  received_ = received;
  return true;
}

nlohmann::json TimelineCache::View(std::string_view instance, std::uint64_t after, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : segments_) {
    if (s["seq"].get<std::uint64_t>() > after) list.push_back(s);
  }
  const double since = received_ == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(now - received_).count();
  return nlohmann::json{{"instance", instance}, {"now_s", now_s_ + since}, {"segments", std::move(list)}, {"open", open_}};
}

}  // namespace talaria
