package ledger

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds the ledger parser arbitrary JSON Lines: it never panics, a failure is a
// *ParseError naming file and line, and what parses survives a round trip through JSON.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../../clusters/prod/model-ledger.jsonl"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"id":"a","kind":"deploy","env":"prod","model":"qwen","revision":"0123456789abcdef0123456789abcdef01234567"}` + "\n"))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		recs, err := Parse("clusters/prod/model-ledger.jsonl", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File == "" || pe.Line < 1 {
				t.Fatalf("error is not a *ParseError with file and line: %v", err)
			}
			return
		}
		var again []byte
		for _, r := range recs {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("marshal %+v: %v", r, err)
			}
			again = append(append(again, line...), '\n')
		}
		back, err := Parse("round-trip", again)
		if err != nil {
			t.Fatalf("records that parsed do not parse again: %v\n%s", err, again)
		}
		if diff := cmp.Diff(recs, back); diff != "" {
			t.Fatalf("round trip changed records (-first +again):\n%s", diff)
		}
	})
}
