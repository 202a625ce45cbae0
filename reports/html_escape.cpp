// html_escape (reports/report.h): every string of the HTML report that came from YAML or the store
// passes through it, in html.cpp and in the files html.cpp draws with (charts.cpp, study.cpp),
// which is why it is in none of them.
#include <string>

#include "reports/report.h"

namespace trainyard {

std::string html_escape(const std::string& text) {
  // Besides markup: control characters (a log's terminal colours) and bidi overrides and isolates
  // (U+202A-U+202E, U+2066-U+2069), which could make a name display as another ("Trojan Source"),
  // become U+FFFD. Tab and newline stay.
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0xE2 && i + 2 < text.size()) {
      const unsigned char b1 = static_cast<unsigned char>(text[i + 1]),
                          b2 = static_cast<unsigned char>(text[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)) {
        out += kReplacement;
        i += 2;
        continue;
      }
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)
          out += kReplacement;
        else
          out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace trainyard
