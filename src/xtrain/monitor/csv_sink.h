// DeepSpeed's csv_monitor format: one file per metric, `<dir>/<tag with '/' and ' ' -> '_'>.csv`,
// first row `step,<last '/'-component of the tag>`, then `<step>,<value>` rows. Each write opens
// the file in append mode and closes it (as DeepSpeed does), so nothing is ever buffered; the
// header is written only when the file is new, so a resumed run continues the same files.
#pragma once
#include <string>

#include "xtrain/monitor/metric_sink.h"

namespace xtrain::monitor {

class CsvSink : public MetricSink {
 public:
  explicit CsvSink(const std::string& dir);
  void write(int64_t step, const std::map<std::string, double>& scalars) override;
  const std::string& dir() const { return dir_; }
  // The file a tag goes to.
  std::string path_for(const std::string& tag) const;

 private:
  std::string dir_;
};

}  // namespace xtrain::monitor
