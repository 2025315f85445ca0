package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/drift"
)

const (
	hookSecret = "T000/B000/XXXXsupersecretXXXX"
	botToken   = "123456:ABC-secret-token"
)

// sinks returns the three sinks pointed at rcv, with their secrets in files/env.
func sinks(t *testing.T, rcv *receiver) []Sink {
	t.Helper()
	slack, err := NewSlackSink(SlackConfig{URLFile: secretFile(t, rcv.URL+"/slack/"+hookSecret)})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_MM_HOOK", rcv.URL+"/hooks/"+hookSecret)
	mm, err := NewMattermostSink(MattermostConfig{URLEnv: "TEST_MM_HOOK", Username: "drift-auditor", IconURL: "https://example.com/icon.png"})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTelegramSink(TelegramConfig{TokenFile: secretFile(t, botToken), ChatID: "-100123", BaseURL: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return []Sink{slack, mm, tg}
}

func TestSinkPayloadGolden(t *testing.T) {
	items := Items(report("dev", rev, deployment(fLogLevel, fAnnot)))
	msgs := []Message{
		DriftMessage(items[0], testOptions()),
		DigestMessage("dev", KindDigest, items, Options{}),
		ResolvedMessage(items[1], Options{}),
	}
	rcv := newReceiver(t, nil)
	for _, s := range sinks(t, rcv) {
		t.Run(s.Name(), func(t *testing.T) {
			before := len(rcv.received())
			for _, m := range msgs {
				if err := s.Send(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			bodies := rcv.received()[before:]
			var out []byte
			for _, b := range bodies {
				out = append(out, indentJSON(t, b)...)
			}
			golden(t, s.Name()+".golden.json", out)
		})
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, p := range rcv.paths {
		if strings.HasPrefix(p, "/bot") && p != "/bot"+botToken+"/sendMessage" {
			t.Errorf("telegram path %q", p)
		}
	}
}

func TestTelegramSplitsLongMessages(t *testing.T) {
	long := strings.Repeat("<&>é", 3000) // 12000 runes, escapes to far more
	m := Message{ID: "x", Kind: KindDrift, Env: "dev", Title: "t <b>", Lines: []Line{{Label: "diff", Text: long, Code: true}, {Text: long}}}
	ps := TelegramPayloads(m, "@chan")
	if len(ps) < 4 {
		t.Fatalf("parts = %d", len(ps))
	}
	for i, p := range ps {
		text := p["text"].(string)
		if n := u16len(text); n > TelegramMaxLen {
			t.Errorf("part %d: %d > %d", i, n, TelegramMaxLen)
		}
		if strings.Count(text, "<pre>") != strings.Count(text, "</pre>") {
			t.Errorf("part %d: unbalanced <pre>", i)
		}
		if strings.Contains(strings.NewReplacer("<pre>", "", "</pre>", "", "<b>", "", "</b>", "").Replace(text), "<") {
			t.Errorf("part %d: unescaped <", i)
		}
		if p["chat_id"] != "@chan" || p["parse_mode"] != "HTML" || p["disable_web_page_preview"] != true {
			t.Errorf("part %d: %v", i, p)
		}
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusInternalServerError })
	closed := newReceiver(t, nil)
	closedURL := closed.URL
	closed.Close()
	stall := newReceiver(t, func(int, http.ResponseWriter) int { return -1 })
	for _, tc := range []struct {
		name string
		rcv  *receiver
		url  string
	}{{"500", down, down.URL}, {"refused", nil, closedURL}, {"timeout", stall, stall.URL}} {
		t.Run(tc.name, func(t *testing.T) {
			slack, _ := NewSlackSink(SlackConfig{URLFile: secretFile(t, tc.url+"/slack/"+hookSecret), Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			t.Setenv("TEST_MM_HOOK", tc.url+"/hooks/"+hookSecret)
			mm, _ := NewMattermostSink(MattermostConfig{URLEnv: "TEST_MM_HOOK", Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			tg, _ := NewTelegramSink(TelegramConfig{TokenFile: secretFile(t, botToken), ChatID: "1", BaseURL: tc.url, Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			for _, s := range []Sink{slack, mm, tg} {
				err := s.Send(context.Background(), Message{ID: "x", Title: "t"})
				if err == nil {
					t.Fatalf("%s: no error", s.Name())
				}
				for e := error(err); e != nil; e = errors.Unwrap(e) {
					msg := e.Error()
					for _, sec := range []string{hookSecret, botToken, "supersecret", "secret-token"} {
						if strings.Contains(msg, sec) {
							t.Errorf("%s: error leaks %q: %s", s.Name(), sec, msg)
						}
					}
				}
				t.Logf("%s: %v", s.Name(), err)
			}
		})
	}
}

func TestSecretDriftNeverInPayloads(t *testing.T) {
	// The drift package masks Secret values; pretend it did not, and check the report package
	// still never lets them out.
	plain := []string{"aHVudGVyMg==", "hunter2", "plain-token-value", "c3VwZXI="}
	sec := drift.Object{APIVersion: "v1", Kind: "Secret", Namespace: "llm", Name: "creds", Status: drift.Modified, Fields: []drift.Field{
		{Path: `.data["password"]`, Desired: "sha256:0123456789ab", Live: "aHVudGVyMg==", Change: drift.Changed, Writer: kubectlEdit},
		{Path: ".data", Desired: map[string]any{"a": "c3VwZXI="}, Live: map[string]any{"a": "hunter2"}, Change: drift.Changed, Writer: kubectlEdit},
		{Path: ".stringData.token", Live: "plain-token-value", Change: drift.Added, Writer: kubectlEdit},
		{Path: `.metadata.annotations["` + lastApplied + `"]`, Live: `{"stringData":{"token":"plain-token-value"}}`, Change: drift.Added},
	}}
	rcv := newReceiver(t, nil)
	n := NewNotifier(NotifierConfig{Window: time.Hour})
	added, _, err := n.Tracker().Observe(report("dev", rev, sec))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for _, it := range added {
		msgs = append(msgs, DriftMessage(it, testOptions()))
	}
	msgs = append(msgs, Fold("dev", added, nil, Options{})...)
	msgs = append(msgs, Fold("dev", nil, added, Options{})...)
	msgs = append(msgs, ResolvedMessage(added[0], Options{}))
	for _, s := range sinks(t, rcv) {
		for _, m := range msgs {
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	bodies := rcv.received()
	if len(bodies) < 3*len(msgs) {
		t.Fatalf("only %d payloads", len(bodies))
	}
	for _, b := range bodies {
		for _, p := range plain {
			if strings.Contains(string(b), p) {
				t.Errorf("payload leaks %q: %s", p, b)
			}
		}
	}
	if !strings.Contains(string(bodies[0]), "sha256:0123456789ab") {
		t.Errorf("digest not shown: %s", bodies[0])
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"-1", 0}, {"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestReadSecret(t *testing.T) {
	t.Setenv("TEST_SECRET", " s3cr3t \n")
	t.Setenv("TEST_EMPTY", "")
	tests := []struct {
		file, env, want string
		wantErr         bool
	}{
		{file: secretFile(t, "from-file"), want: "from-file"},
		{env: "TEST_SECRET", want: "s3cr3t"},
		{env: "TEST_EMPTY", wantErr: true},
		{file: "/nonexistent/secret", wantErr: true},
		{wantErr: true},
	}
	for _, tt := range tests {
		got, err := ReadSecret("x", tt.file, tt.env)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ReadSecret(%q, %q) = %q, %v", tt.file, tt.env, got, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error leaks the value: %v", err)
		}
	}
}

// TestMentionsInDriftedValuesPingNobody: a value someone typed into the cluster reaches chat as
// text, never as a mention in the syntax each chat parses outside code blocks: Slack's <!here>,
// Mattermost's and Telegram's @channel / @alice.
func TestMentionsInDriftedValuesPingNobody(t *testing.T) {
	f := at(drift.Field{Live: "@channel <!here> @alice", Change: drift.Added, Writer: kubectlEdit}, "metadata", "annotations", "note")
	msg := DriftMessage(Items(report("dev", rev, deployment(f)))[0], testOptions())
	outsideCode := map[string]*regexp.Regexp{
		"slack":      regexp.MustCompile("(?s)```.*?```"),
		"mattermost": regexp.MustCompile("(?s)```.*?```"),
		"telegram":   regexp.MustCompile("(?s)<pre>.*?</pre>"),
	}
	mentions := map[string][]string{
		"slack":      {"<!here>", "<!channel>"},
		"mattermost": {"@channel", "@alice"},
		"telegram":   {"@channel", "@alice"},
	}
	rcv := newReceiver(t, nil)
	for _, s := range sinks(t, rcv) {
		before := len(rcv.received())
		if err := s.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		for _, body := range rcv.received()[before:] {
			var payload map[string]any
			if err := json.Unmarshal(body, &payload); err != nil {
				t.Fatal(err)
			}
			text := outsideCode[s.Name()].ReplaceAllString(fmt.Sprint(payload), "")
			if !strings.Contains(text, "channel") {
				t.Fatalf("%s: the value is not in the message at all:\n%s", s.Name(), text)
			}
			for _, mention := range mentions[s.Name()] {
				if strings.Contains(text, mention) {
					t.Errorf("%s: the payload carries %q as a live mention:\n%s", s.Name(), mention, text)
				}
			}
		}
	}
}
