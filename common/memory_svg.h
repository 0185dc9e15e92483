// The active-memory timeline of a memory run as a standalone SVG, drawn by
// benchd itself (no Python, no browser-side script): like memory_viz's
// "Active Memory Timeline", allocations are stacked in the order they were
// made, each band dropping when one below it is freed; the memory resident
// before recording (weights, optimizer state) is the grey band at the bottom;
// the phases (forward, backward, optimizer_step) are shaded behind and named
// above. The x axis is the trace's alloc/free events in order (as
// memory_viz's), the y axis bytes.
//
// The `max_bands` largest allocations get a band (and a tooltip: size, phase,
// origin); the rest are summed in one band on top of them, so the file stays
// small (tens to hundreds of kB) whatever the trace length.
#ifndef BENCHD_COMMON_MEMORY_SVG_H_
#define BENCHD_COMMON_MEMORY_SVG_H_

#include <string>

#include "common/memory_analysis.h"
#include "common/memory_trace.h"

namespace benchd::memory {

struct TimelineOptions {
  std::string title;     // "small train_step bf16, batch 4 x context 128"
  std::string subtitle;  // extra facts for the second line
  int width = 1200;
  int height = 600;
  int max_bands = 150;
};

// `analysis` must come from Analyze(snapshot) (same device).
std::string RenderTimelineSvg(const Snapshot& snapshot, const Analysis& analysis,
                              const TimelineOptions& options = {});

// "1.50 GiB", "12.0 MiB", "512 B".
std::string HumanBytes(int64_t bytes);

}  // namespace benchd::memory

#endif  // BENCHD_COMMON_MEMORY_SVG_H_
