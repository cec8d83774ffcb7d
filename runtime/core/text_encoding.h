// What the readers of text files (models, CSV, JSON) say of bytes that are not UTF-8 text: a
// UTF-16 or UTF-32 file (by its byte-order mark), a binary file (a NUL byte), an invalid UTF-8
// sequence; and how a character that cannot be seen is shown (by its code point). Header-only,
// for the frontend and the runtime alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ssm {

inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

inline std::string_view without_utf8_bom(std::string_view text) {
  return text.starts_with(kUtf8Bom) ? text.substr(kUtf8Bom.size()) : text;
}

// The encoding a byte-order mark at the start of `text` announces, when it is not UTF-8's.
inline std::optional<std::string> foreign_byte_order_mark(std::string_view text) {
  if (text.starts_with(std::string_view("\x00\x00\xFE\xFF", 4)))
    return "a UTF-32 (big-endian) byte-order mark";
  if (text.starts_with(std::string_view("\xFF\xFE\x00\x00", 4)))
    return "a UTF-32 (little-endian) byte-order mark";
  if (text.starts_with("\xFE\xFF"))
    return "a UTF-16 (big-endian) byte-order mark";
  if (text.starts_with("\xFF\xFE"))
    return "a UTF-16 (little-endian) byte-order mark";
  return std::nullopt;
}

// The length of the valid UTF-8 sequence at text[i] (1 to 4), or 0 when it is not one.
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  const std::size_t n = c < 0x80           ? 1
                        : (c >> 5) == 0x6  ? 2
                        : (c >> 4) == 0xE  ? 3
                        : (c >> 3) == 0x1E ? 4
                                           : 0;
  if (n == 0 || i + n > text.size())
    return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80)
      return 0;
  if (n == 2 && c < 0xC2)
    return 0; // overlong
  if (n == 3 && ((c == 0xE0 && byte(i + 1) < 0xA0) || (c == 0xED && byte(i + 1) >= 0xA0)))
    return 0; // overlong, or a UTF-16 surrogate
  if (n == 4 &&
      ((c == 0xF0 && byte(i + 1) < 0x90) || c > 0xF4 || (c == 0xF4 && byte(i + 1) >= 0x90)))
    return 0; // overlong, or beyond U+10FFFF
  return n;
}

// Why `text` is not UTF-8 text (after an optional UTF-8 byte-order mark), or nullopt:
// "not a UTF-8 text file (it starts with a UTF-16 (little-endian) byte-order mark; save it as
// UTF-8)", "... (a NUL byte at line 3, column 7: a binary file?)", "... (the byte 0xE9 at line
// 2, column 5 starts no UTF-8 character: Latin-1?)".
inline std::optional<std::string> not_utf8_text(std::string_view text) {
  if (std::optional<std::string> bom = foreign_byte_order_mark(text))
    return fmt::format("not a UTF-8 text file (it starts with {}; save it as UTF-8)", *bom);
  text = without_utf8_bom(text);
  int64_t line = 1, column = 1;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '\0')
      return fmt::format("not a UTF-8 text file (a NUL byte at line {}, column {}: a binary "
                         "file?)",
                         line, column);
    const std::size_t n = utf8_sequence_length(text, i);
    if (n == 0)
      return fmt::format("not a UTF-8 text file (the byte 0x{:02X} at line {}, column {} starts "
                         "no UTF-8 character: Latin-1 or another encoding? save it as UTF-8)",
                         static_cast<unsigned char>(text[i]), line, column);
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
  return std::nullopt;
}

// The code point of the valid UTF-8 sequence of length n at text[i].
inline char32_t utf8_code_point(std::string_view text, std::size_t i, std::size_t n) {
  const auto byte = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[k]));
  };
  if (n == 1)
    return byte(i);
  char32_t cp = byte(i) & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  return cp;
}

// A character for a message: 'x' as itself, one that cannot be seen (a control character, a
// space other than ' ', a zero-width character, a byte-order mark) by its code point, "U+FEFF
// (a byte-order mark)"; printable ones that are not ASCII with their code point too, so that
// look-alikes ('−' for '-') are told apart.
inline std::string shown_character(std::string_view text, std::size_t i) {
  const std::size_t n = utf8_sequence_length(text, i);
  if (n == 0)
    return fmt::format("byte 0x{:02X}", static_cast<unsigned char>(text[i]));
  const char32_t cp = utf8_code_point(text, i, n);
  const auto code = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  if (cp == 0xFEFF)
    return code + " (a byte-order mark)";
  if (cp == 0x00A0 || cp == 0x202F)
    return code + " (a non-breaking space)";
  if ((cp >= 0x200B && cp <= 0x200F) || cp == 0x2060 || cp == 0x00AD)
    return code + " (an invisible character)";
  if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x3000)
    return code + " (a space or line separator)";
  if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0))
    return code + " (a control character)";
  if (cp < 0x80)
    return fmt::format("'{}'", text.substr(i, 1));
  return fmt::format("'{}' ({})", text.substr(i, n), code);
}

} // namespace ssm
