// Strings stored once per process, held by a pointer: what a trace's calls
// name (a session, a model, a task) repeats across every call of a session
// and across sessions, and a replay at cluster scale holds millions of
// calls. An InternedString is 8 bytes, copies as a pointer, tests equality
// by pointer (orders by content), and reads as a `const std::string&`.
//
// The pool only grows: it keeps each distinct string for the process's
// lifetime (a trace names few models and tasks; its session ids are what
// the pool holds, about 50 bytes each). Meant for traces and tools that read
// them, not for names a long-running server learns from its clients.
//
// Interning takes a lock (thread-safe); reading, copying and comparing do
// not.
#pragma once

#include <compare>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace talaria {

class InternedString {
 public:
  // The empty string.
  InternedString() noexcept : s_(&Empty()) {}
  // Interns `s` (looks it up, adds it when new).
  explicit InternedString(std::string_view s) : s_(&Intern(s)) {}
  // Interns `s` (a std::string or a literal converts to the view).
  InternedString& operator=(std::string_view s) {
    s_ = &Intern(s);
    return *this;
  }

  const std::string& str() const noexcept { return *s_; }
  operator const std::string&() const noexcept { return *s_; }  // NOLINT(google-explicit-constructor)
  operator std::string_view() const noexcept { return *s_; }     // NOLINT(google-explicit-constructor)
  bool empty() const noexcept { return s_->empty(); }
  std::size_t size() const noexcept { return s_->size(); }

  // Equal strings are one pooled string: equality is a pointer comparison.
  friend bool operator==(const InternedString& a, const InternedString& b) noexcept { return a.s_ == b.s_; }
  friend bool operator==(const InternedString& a, std::string_view b) noexcept { return *a.s_ == b; }
  friend std::strong_ordering operator<=>(const InternedString& a, const InternedString& b) noexcept {
    return *a.s_ <=> *b.s_;
  }
  friend std::ostream& operator<<(std::ostream& out, const InternedString& s) { return out << *s.s_; }
  friend std::string operator+(const std::string& a, const InternedString& b) { return a + *b.s_; }
  friend std::string operator+(const InternedString& a, const std::string& b) { return *a.s_ + b; }
  friend std::string operator+(const char* a, const InternedString& b) { return a + *b.s_; }
  friend std::string operator+(const InternedString& a, const char* b) { return *a.s_ + b; }

  // Distinct strings pooled so far (for tests and memory accounting).
  static std::size_t PoolSize();

 private:
  static const std::string& Empty();
  static const std::string& Intern(std::string_view s);
  const std::string* s_;
};

}  // namespace talaria
