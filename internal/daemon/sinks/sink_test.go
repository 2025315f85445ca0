package sinks_test

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

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/daemon/notify/notifytest"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

const (
	hookSecret = "T000/B000/XXXXsupersecretXXXX"
	botToken   = "123456:ABC-secret-token"
)

// allSinks returns the three sinks pointed at rcv, with their secrets in files/env.
func allSinks(t *testing.T, rcv *notifytest.Receiver) []sinks.Sink {
	t.Helper()
	slack, err := sinks.NewSlack(sinks.SlackConfig{URLFile: notifytest.SecretFile(t, rcv.URL+"/slack/"+hookSecret)})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_MM_HOOK", rcv.URL+"/hooks/"+hookSecret)
	mm, err := sinks.NewMattermost(sinks.MattermostConfig{URLEnv: "TEST_MM_HOOK", Username: "drift-auditor", IconURL: "https://example.com/icon.png"})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := sinks.NewTelegram(sinks.TelegramConfig{TokenFile: notifytest.SecretFile(t, botToken), ChatID: "-100123", BaseURL: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return []sinks.Sink{slack, mm, tg}
}

func TestSinkPayloadGolden(t *testing.T) {
	items := notify.Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(notifytest.LogLevel, notifytest.Annotation)))
	msgs := []message.Message{
		notify.DriftMessage(items[0], testOptions()),
		notify.DigestMessage("dev", message.KindDigest, items, notify.Options{}),
		notify.ResolvedMessage(items[1], notify.Options{}),
	}
	rcv := notifytest.NewReceiver(t, nil)
	for _, s := range allSinks(t, rcv) {
		t.Run(s.Name(), func(t *testing.T) {
			before := len(rcv.Received())
			for _, m := range msgs {
				if err := s.Send(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			bodies := rcv.Received()[before:]
			var out []byte
			for _, b := range bodies {
				out = append(out, notifytest.IndentJSON(t, b)...)
			}
			notifytest.Golden(t, s.Name()+".golden.json", out)
		})
	}
	for _, p := range rcv.Paths() {
		if strings.HasPrefix(p, "/bot") && p != "/bot"+botToken+"/sendMessage" {
			t.Errorf("telegram path %q", p)
		}
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	down := notifytest.NewReceiver(t, func(int, http.ResponseWriter) int { return http.StatusInternalServerError })
	closed := notifytest.NewReceiver(t, nil)
	closedURL := closed.URL
	closed.Close()
	stall := notifytest.NewReceiver(t, func(int, http.ResponseWriter) int { return -1 })
	for _, tc := range []struct {
		name string
		rcv  *notifytest.Receiver
		url  string
	}{{"500", down, down.URL}, {"refused", nil, closedURL}, {"timeout", stall, stall.URL}} {
		t.Run(tc.name, func(t *testing.T) {
			slack, _ := sinks.NewSlack(sinks.SlackConfig{URLFile: notifytest.SecretFile(t, tc.url+"/slack/"+hookSecret), Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			t.Setenv("TEST_MM_HOOK", tc.url+"/hooks/"+hookSecret)
			mm, _ := sinks.NewMattermost(sinks.MattermostConfig{URLEnv: "TEST_MM_HOOK", Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			tg, _ := sinks.NewTelegram(sinks.TelegramConfig{TokenFile: notifytest.SecretFile(t, botToken), ChatID: "1", BaseURL: tc.url, Timeout: metav1.Duration{Duration: 200 * time.Millisecond}})
			for _, s := range []sinks.Sink{slack, mm, tg} {
				err := s.Send(context.Background(), message.Message{ID: "x", Title: "t"})
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
		{Path: `.data["password"]`, Desired: "sha256:0123456789ab", Live: "aHVudGVyMg==", Change: drift.Changed, Writer: notifytest.KubectlEdit},
		{Path: ".data", Desired: map[string]any{"a": "c3VwZXI="}, Live: map[string]any{"a": "hunter2"}, Change: drift.Changed, Writer: notifytest.KubectlEdit},
		{Path: ".stringData.token", Live: "plain-token-value", Change: drift.Added, Writer: notifytest.KubectlEdit},
		{Path: `.metadata.annotations["` + "kubectl.kubernetes.io/last-applied-configuration" + `"]`, Live: `{"stringData":{"token":"plain-token-value"}}`, Change: drift.Added},
	}}
	rcv := notifytest.NewReceiver(t, nil)
	n := notify.NewNotifier(notify.NotifierConfig{Window: time.Hour})
	added, _, err := n.Tracker().Observe(notifytest.Report("dev", notifytest.Rev, sec))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []message.Message
	for _, it := range added {
		msgs = append(msgs, notify.DriftMessage(it, testOptions()))
	}
	msgs = append(msgs, notify.Fold("dev", added, nil, notify.Options{})...)
	msgs = append(msgs, notify.Fold("dev", nil, added, notify.Options{})...)
	msgs = append(msgs, notify.ResolvedMessage(added[0], notify.Options{}))
	for _, s := range allSinks(t, rcv) {
		for _, m := range msgs {
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	bodies := rcv.Received()
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

func TestReadSecret(t *testing.T) {
	t.Setenv("TEST_SECRET", " s3cr3t \n")
	t.Setenv("TEST_EMPTY", "")
	tests := []struct {
		file, env, want string
		wantErr         bool
	}{
		{file: notifytest.SecretFile(t, "from-file"), want: "from-file"},
		{env: "TEST_SECRET", want: "s3cr3t"},
		{env: "TEST_EMPTY", wantErr: true},
		{file: "/nonexistent/secret", wantErr: true},
		{wantErr: true},
	}
	for _, tt := range tests {
		got, err := sinks.ReadSecret("x", tt.file, tt.env)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("sinks.ReadSecret(%q, %q) = %q, %v", tt.file, tt.env, got, err)
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
	f := notifytest.At(drift.Field{Live: "@channel <!here> @alice", Change: drift.Added, Writer: notifytest.KubectlEdit}, "metadata", "annotations", "note")
	msg := notify.DriftMessage(notify.Items(notifytest.Report("dev", notifytest.Rev, notifytest.Deployment(f)))[0], testOptions())
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
	rcv := notifytest.NewReceiver(t, nil)
	for _, s := range allSinks(t, rcv) {
		before := len(rcv.Received())
		if err := s.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		for _, body := range rcv.Received()[before:] {
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

func testOptions() notify.Options {
	return notify.Options{ArgoCDURL: "https://argocd.example.com/", ReadFile: notifytest.ReadDevOverlay}
}
