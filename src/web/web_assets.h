// Web assets built into the binary (src/web/CMakeLists.txt): served by the
// HTTP front (/dashboard) and inlined into replay reports (report/), so
// nothing is fetched from the network at run time.
#pragma once

#include <string_view>

namespace talaria::web {

// Chart.js 3.9.1, minified, from Debian's libjs-chart.js (MIT licence; its
// header names it).
std::string_view ChartJs();
// The live cluster dashboard (GET /dashboard): polls /v1/telemetry and
// /v1/timeline with the key it is given.
std::string_view DashboardHtml();
// The replay report's page template: "/*TALARIA_CHART_JS*/",
// "/*TALARIA_DATA*/" and "/*TALARIA_REPORT_JS*/", in that order, mark where
// the report writer puts Chart.js, the data and the script (report/report.h).
std::string_view ReportHtml();
std::string_view ReportJs();

}  // namespace talaria::web
