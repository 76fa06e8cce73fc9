#pragma once
// A self-contained HTML report with inline SVG charts (no network, no JavaScript): what the tour
// writes. Charts are line charts (series of y over their index) and grouped bars (off and on).
// The output is also well-formed XML, so `xmllint --noout` checks it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <ember/ember.h>

namespace ember::examples {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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
      default:
        out += c;
    }
  }
  return out;
}

class Report {
 public:
  struct Series {
    std::string name;
    std::vector<double> y;
  };
  struct Bar {
    std::string label;
    double off, on;
  };

  explicit Report(std::string title) : title_(std::move(title)) {}

  void paragraph(const std::string& text) { body_ += "<p>" + xml_escape(text) + "</p>\n"; }

  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
    body_ += "<table>\n<tr>";
    for (const auto& h : header) body_ += "<th>" + xml_escape(h) + "</th>";
    body_ += "</tr>\n";
    for (const auto& r : rows) {
      body_ += "<tr>";
      for (const auto& c : r) body_ += "<td>" + xml_escape(c) + "</td>";
      body_ += "</tr>\n";
    }
    body_ += "</table>\n";
  }

  // y of each series against its index (iterations, steps), on one set of axes; `log_y` for
  // losses that fall over orders of magnitude.
  void line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  const std::vector<Series>& series, bool log_y = false) {
    EMBER_CHECK(!series.empty(), "Report.line_chart '", title, "': no series");
    const double w = 580, h = 300, left = 80, right = 150, top = 28, bottom = 44;
    size_t n = 0;
    double lo = 1e300, hi = -1e300;
    auto tr = [&](double v) { return log_y ? std::log10(std::max(v, 1e-12)) : v; };
    for (const auto& s : series) {
      EMBER_CHECK(!s.y.empty(), "Report.line_chart '", title, "': series '", s.name, "' has no data");
      n = std::max(n, s.y.size());
      for (double v : s.y)
        if (std::isfinite(v)) lo = std::min(lo, tr(v)), hi = std::max(hi, tr(v));
    }
    if (hi <= lo) hi = lo + 1;
    const double pw = w - left - right, ph = h - top - bottom;
    auto px = [&](size_t i) { return left + (n > 1 ? pw * double(i) / double(n - 1) : pw / 2); };
    auto py = [&](double v) { return top + ph * (1 - (tr(v) - lo) / (hi - lo)); };
    std::string svg = open_svg(w, h, title);
    svg += axes(left, top, pw, ph);
    svg += text(left + pw / 2, h - 8, x_label + (n ? " (0 to " + std::to_string(n - 1) + ")" : ""), "middle");
    svg += text(14, top + ph / 2, y_label + (log_y ? " (log)" : ""), "middle", true);
    svg += text(left - 6, top + 4, number(log_y ? std::pow(10, hi) : hi), "end");
    svg += text(left - 6, top + ph, number(log_y ? std::pow(10, lo) : lo), "end");
    for (size_t k = 0; k < series.size(); ++k) {
      std::string points;
      for (size_t i = 0; i < series[k].y.size(); ++i)
        if (std::isfinite(series[k].y[i])) points += number(px(i)) + "," + number(py(series[k].y[i])) + " ";
      svg += "<polyline fill=\"none\" stroke=\"" + color(k) + "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
      svg += "<rect x=\"" + number(w - right + 12) + "\" y=\"" + number(top + 18 * k) +
             "\" width=\"12\" height=\"12\" fill=\"" + color(k) + "\"/>\n";
      svg += text(w - right + 30, top + 18 * k + 10, series[k].name, "start");
    }
    body_ += svg + "</svg>\n";
    ++charts_;
  }

  // Off and on side by side for each label, each pair scaled to its own larger value (the labels
  // carry the numbers), so that techniques with different units share one chart.
  void bar_chart(const std::string& title, const std::vector<Bar>& bars) {
    EMBER_CHECK(!bars.empty(), "Report.bar_chart '", title, "': no bars");
    const double w = 560, row = 34, left = 190, top = 28;
    const double h = top + row * bars.size() + 30, pw = w - left - 80;
    std::string svg = open_svg(w, h, title);
    for (size_t i = 0; i < bars.size(); ++i) {
      const double scale = std::max({bars[i].off, bars[i].on, 1e-300});
      const double y = top + row * i;
      svg += text(left - 8, y + 17, bars[i].label, "end");
      svg += "<rect x=\"" + number(left) + "\" y=\"" + number(y + 2) + "\" width=\"" +
             number(pw * bars[i].off / scale) + "\" height=\"13\" fill=\"" + color(1) + "\"/>\n";
      svg += "<rect x=\"" + number(left) + "\" y=\"" + number(y + 16) + "\" width=\"" +
             number(pw * bars[i].on / scale) + "\" height=\"13\" fill=\"" + color(0) + "\"/>\n";
      svg += text(left + pw * bars[i].off / scale + 4, y + 13, number(bars[i].off) + " off", "start");
      svg += text(left + pw * bars[i].on / scale + 4, y + 27, number(bars[i].on) + " on", "start");
    }
    body_ += svg + "</svg>\n";
    ++charts_;
  }

  int charts() const { return charts_; }

  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    EMBER_CHECK(out.good(), "Report: cannot write '", path, "'");
    out << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head><meta charset=\"utf-8\"/>"
        << "<title>" << xml_escape(title_) << "</title>\n<style>"
        << "body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
        << "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3em .6em;text-align:left}"
        << "svg{display:block;margin:1em 0}</style></head>\n<body>\n<h1>" << xml_escape(title_) << "</h1>\n"
        << body_ << "</body>\n</html>\n";
    out.close();
    EMBER_CHECK(out.good(), "Report: writing '", path, "' failed");
  }

 private:
  static std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
  }
  static std::string color(size_t k) {
    static const char* palette[] = {"#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e"};
    return palette[k % 5];
  }
  static std::string text(double x, double y, const std::string& s, const char* anchor, bool vertical = false) {
    std::string t =
        "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" font-size=\"12\" text-anchor=\"" + anchor + "\"";
    if (vertical) t += " transform=\"rotate(-90 " + number(x) + " " + number(y) + ")\"";
    return t + ">" + xml_escape(s) + "</text>\n";
  }
  static std::string open_svg(double w, double h, const std::string& title) {
    return "<h3>" + xml_escape(title) + "</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(w) +
           "\" height=\"" + number(h) + "\" viewBox=\"0 0 " + number(w) + " " + number(h) + "\">\n";
  }
  static std::string axes(double left, double top, double pw, double ph) {
    return "<path d=\"M" + number(left) + " " + number(top) + " V" + number(top + ph) + " H" + number(left + pw) +
           "\" stroke=\"#444\" fill=\"none\"/>\n";
  }

  std::string title_, body_;
  int charts_ = 0;
};

}  // namespace ember::examples
