package schedule

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of the repository's schedules")

// repoSchedules are the schedule files of the repository (clusters/<env>/schedule.yaml).
func repoSchedules(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(projectRoot, "clusters", "*", "schedule.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no schedule file in the repository")
	return files
}

// TestRepoSchedules: every schedule file of the repository decodes, its targets exist, and the
// decoded schedule equals its golden description (recorded from the hand parser Parse
// replaced, so the typed decode reads these files identically).
func TestRepoSchedules(t *testing.T) {
	files := prodFiles(t)
	for _, p := range repoSchedules(t) {
		rel, err := filepath.Rel(projectRoot, p)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			s, err := Parse(rel, files[rel])
			require.NoError(t, err)
			require.NoError(t, s.CheckTargets(files))
			env := filepath.Base(filepath.Dir(p))
			golden := filepath.Join("testdata", env+"-schedule.golden")
			got := describe(s)
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)
		})
	}
}

// describe is a deterministic text form of everything Parse decodes.
func describe(s *Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "file %s\nlead %s\ncoldStart %+v\n", s.File, s.Lead, s.ColdStart)
	for _, p := range s.Peaks {
		fmt.Fprintf(&b, "peak %q line %d\n", p.Name, p.Line)
		fmt.Fprintf(&b, "  cron %q daysOfMonth %v weekendPolicy %q dates %v at %s timeZone %q location %s\n",
			p.Cron, p.DaysOfMonth, p.WeekendPolicy, p.Dates, p.At, p.TimeZone, p.Location)
		fmt.Fprintf(&b, "  exclude %v duration %s warm %d (line %d) cron schedule %+v\n",
			p.Exclude, p.Duration, p.Warm, p.warmLine, p.sched)
		keys := make([]string, 0, len(p.Target.lines))
		for k := range p.Target.lines {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lines []string
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("%s:%d", k, p.Target.lines[k]))
		}
		fmt.Fprintf(&b, "  target %+v namespace %q line %d keys %s\n", p.Target, p.Target.Namespace, p.Target.Line, strings.Join(lines, " "))
	}
	return b.String()
}
