// Reading TOML configuration (profiles, cluster configs) in the project's
// error style (core/error.h): every problem is recorded with the file, the
// line and the dotted key, and keys nobody read are rejected, so a typo is
// never silently ignored. Not synchronized.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <toml++/toml.h>
#include <vector>

#include "core/error.h"

namespace talaria {

// Parses a TOML file; a syntax error becomes an InputError naming the line.
toml::table ParseTomlFile(const std::string& path);
// The same for TOML text; `source` names it in errors.
toml::table ParseTomlText(std::string_view text, const std::string& source);

class TomlSection {
 public:
  // `table` may be null (an absent optional section). `prefix` is the dotted
  // path of this table ("" at the top, "instance[0]." ...).
  TomlSection(const toml::table* table, std::string path, std::string prefix, ProblemList& problems)
      : table_(table), path_(std::move(path)), prefix_(std::move(prefix)), problems_(problems) {}

  bool present() const { return table_ != nullptr; }
  const toml::table* table() const { return table_; }
  std::string Key(std::string_view key) const { return prefix_ + std::string(key); }

  // Records a problem at `at` (or at this table) for `key`.
  void Fail(std::string_view key, const toml::node* at, std::string_view message);
  // The node for `key`, marking it read; records "missing" when required.
  const toml::node* Get(std::string_view key, bool required);

  // Required values (absent: a problem, and 0 / empty returned).
  double Number(std::string_view key, double min_exclusive, bool required = true);
  std::int64_t Integer(std::string_view key, std::int64_t min, bool required = true);
  std::string String(std::string_view key, std::initializer_list<std::string_view> allowed);
  // A non-empty array of finite numbers >= 0, optionally strictly increasing.
  std::vector<double> Numbers(std::string_view key, bool increasing, const toml::node** at = nullptr);
  // `rows` arrays of `cols` such numbers.
  std::vector<std::vector<double>> Matrix(std::string_view key, std::size_t rows, std::size_t cols);
  TomlSection Sub(std::string_view key, bool required);

  // Optional values: `out` keeps its default when the key is absent.
  void Optional(std::string_view key, double& out, double min, double max);
  void Optional(std::string_view key, std::int32_t& out, double min, double max);
  void Optional(std::string_view key, std::int64_t& out, double min, double max);
  void Optional(std::string_view key, bool& out);
  void Optional(std::string_view key, std::string& out);
  void Optional(std::string_view key, std::vector<std::string>& out);

  // Every key of this table that was never read is a problem.
  void RejectUnknown();

 private:
  std::optional<double> OptionalNumber(std::string_view key, bool integral, double min, double max);
  std::vector<double> NumbersOf(std::string_view key, const toml::node* n, bool increasing);

  const toml::table* table_;
  std::string path_;
  std::string prefix_;
  ProblemList& problems_;
  std::set<std::string> used_;
};

}  // namespace talaria
