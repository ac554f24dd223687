#include "core/toml_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace talaria {
namespace {

std::optional<double> NumberOf(const toml::node* n) {
  if (n->is_integer()) return static_cast<double>(*n->value<std::int64_t>());
  if (n->is_floating_point()) return *n->value<double>();
  return std::nullopt;
}

std::string Format(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

namespace {

InputError NotToml(const toml::parse_error& e, const std::string& source) {
  const auto line = e.source().begin.line;
  return InputError(line > 0 ? source + ":" + std::to_string(line) : source,
                    "not valid TOML: " + std::string(e.description()));
}

}  // namespace

toml::table ParseTomlFile(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw NotToml(e, path);
  }
}

toml::table ParseTomlText(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw NotToml(e, source);
  }
}

void TomlSection::Fail(std::string_view key, const toml::node* at, std::string_view message) {
  std::string where = path_;
  const toml::node* line_of = at != nullptr ? at : table_;
  if (line_of != nullptr && line_of->source().begin.line > 0) {
    where.append(":").append(std::to_string(line_of->source().begin.line));
  }
  // Built by append: GCC 12 misreports "literal" + std::string&& (PR 105329).
  std::string text = "key '";
  text.append(Key(key)).append("': ").append(message);
  problems_.Add(where, text);
}

const toml::node* TomlSection::Get(std::string_view key, bool required) {
  used_.insert(std::string(key));
  const toml::node* n = table_ != nullptr ? table_->get(key) : nullptr;
  if (n == nullptr && required) Fail(key, nullptr, "missing");
  return n;
}

double TomlSection::Number(std::string_view key, double min_exclusive, bool required) {
  const toml::node* n = Get(key, required);
  if (n == nullptr) return 0;
  auto v = NumberOf(n);
  if (!v) {
    Fail(key, n, "must be a number");
    return 0;
  }
  if (!(*v > min_exclusive)) {
    Fail(key, n, "must be greater than " + Format(min_exclusive));
    return 0;
  }
  return *v;
}

std::int64_t TomlSection::Integer(std::string_view key, std::int64_t min, bool required) {
  const toml::node* n = Get(key, required);
  if (n == nullptr) return 0;
  if (!n->is_integer()) {
    Fail(key, n, "must be an integer");
    return 0;
  }
  auto v = *n->value<std::int64_t>();
  if (v < min) {
    Fail(key, n, "must be at least " + std::to_string(min));
    return 0;
  }
  return v;
}

std::string TomlSection::String(std::string_view key, std::initializer_list<std::string_view> allowed) {
  const toml::node* n = Get(key, true);
  if (n == nullptr) return {};
  if (!n->is_string()) {
    Fail(key, n, "must be a string");
    return {};
  }
  std::string v = *n->value<std::string>();
  if (allowed.size() > 0 && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    Fail(key, n, "'" + v + "' is not one of: " + list);
    return {};
  }
  return v;
}

std::vector<double> TomlSection::NumbersOf(std::string_view key, const toml::node* n, bool increasing) {
  const toml::array* a = n->as_array();
  if (a == nullptr || a->empty()) {
    Fail(key, n, "must be a non-empty array of numbers");
    return {};
  }
  std::vector<double> out;
  for (const auto& e : *a) {
    auto v = NumberOf(&e);
    if (!v || !std::isfinite(*v) || *v < 0) {
      Fail(key, &e, "entries must be finite numbers >= 0");
      return {};
    }
    if (increasing && !out.empty() && *v <= out.back()) {
      Fail(key, &e, "entries must be strictly increasing");
      return {};
    }
    out.push_back(*v);
  }
  return out;
}

std::vector<double> TomlSection::Numbers(std::string_view key, bool increasing, const toml::node** at) {
  const toml::node* n = Get(key, true);
  if (at != nullptr) *at = n;
  if (n == nullptr) return {};
  return NumbersOf(key, n, increasing);
}

std::vector<std::vector<double>> TomlSection::Matrix(std::string_view key, std::size_t rows, std::size_t cols) {
  const toml::node* n = Get(key, true);
  if (n == nullptr) return {};
  const toml::array* a = n->as_array();
  if (a == nullptr || a->size() != rows) {
    Fail(key, n, "must be an array of " + std::to_string(rows) + " rows");
    return {};
  }
  std::vector<std::vector<double>> out;
  for (const auto& row : *a) {
    auto values = NumbersOf(key, &row, false);
    if (values.size() != cols) {
      Fail(key, &row, "each row must have " + std::to_string(cols) + " numbers");
      return {};
    }
    out.push_back(std::move(values));
  }
  return out;
}

TomlSection TomlSection::Sub(std::string_view key, bool required) {
  const toml::node* n = Get(key, required);
  const toml::table* t = n != nullptr ? n->as_table() : nullptr;
  if (n != nullptr && t == nullptr) Fail(key, n, "must be a table");
  return TomlSection(t, path_, Key(key) + ".", problems_);
}

std::optional<double> TomlSection::OptionalNumber(std::string_view key, bool integral, double min, double max) {
  const toml::node* n = Get(key, false);
  if (n == nullptr) return std::nullopt;
  auto v = NumberOf(n);
  if (!v || (integral && !n->is_integer())) {
    Fail(key, n, integral ? "must be an integer" : "must be a number");
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    Fail(key, n, "must be in [" + Format(min) + ", " + Format(max) + "]");
    return std::nullopt;
  }
  return v;
}

void TomlSection::Optional(std::string_view key, double& out, double min, double max) {
  if (auto v = OptionalNumber(key, false, min, max)) out = *v;
}

void TomlSection::Optional(std::string_view key, std::int32_t& out, double min, double max) {
  if (auto v = OptionalNumber(key, true, min, max)) out = static_cast<std::int32_t>(*v);
}

void TomlSection::Optional(std::string_view key, std::int64_t& out, double min, double max) {
  if (auto v = OptionalNumber(key, true, min, max)) out = static_cast<std::int64_t>(*v);
}

void TomlSection::Optional(std::string_view key, bool& out) {
  const toml::node* n = Get(key, false);
  if (n == nullptr) return;
  if (!n->is_boolean()) return Fail(key, n, "must be true or false");
  out = *n->value<bool>();
}

void TomlSection::Optional(std::string_view key, std::string& out) {
  const toml::node* n = Get(key, false);
  if (n == nullptr) return;
  if (!n->is_string()) return Fail(key, n, "must be a string");
  out = *n->value<std::string>();
}

void TomlSection::Optional(std::string_view key, std::vector<std::string>& out) {
  const toml::node* n = Get(key, false);
  if (n == nullptr) return;
  const toml::array* a = n->as_array();
  if (a == nullptr) return Fail(key, n, "must be an array of strings");
  out.clear();
  for (const auto& e : *a) {
    if (!e.is_string()) return Fail(key, &e, "must be an array of strings");
    out.push_back(*e.value<std::string>());
  }
}

void TomlSection::RejectUnknown() {
  if (table_ == nullptr) return;
  for (const auto& [k, v] : *table_) {
    if (!used_.contains(std::string(k.str()))) Fail(k.str(), &v, "unknown key");
  }
}

}  // namespace talaria
