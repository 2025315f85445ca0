package schedule

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse feeds the schedule parser arbitrary files: it never panics, an error always names
// the file, and parsing is deterministic.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../../clusters/prod/schedule.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("peaks:\n  - name: p\n    recurrence: {cron: \"0 9 * * 1-5\", timeZone: UTC}\n    duration: 1h\n"))
	f.Add([]byte("leadTime: {margin: -1m}\npeaks: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		s1, err1 := Parse("clusters/prod/schedule.yaml", data)
		s2, err2 := Parse("clusters/prod/schedule.yaml", data)
		if (err1 == nil) != (err2 == nil) || (s1 == nil) != (s2 == nil) {
			t.Fatalf("parse is not deterministic: %v / %v", err1, err2)
		}
		if err1 != nil && !strings.Contains(err1.Error(), "schedule.yaml") {
			t.Fatalf("error does not name the file: %v", err1)
		}
	})
}
