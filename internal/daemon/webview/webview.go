// Package webview serves the auditor's pages for people: the envs with open drift (who, for how
// long, the value Git wants, the live value), recent episodes and how they ended, the models each
// env serves, the next scheduled scale-ups, and a blame page per object. Server-rendered HTML from
// Go templates: no build step, no JavaScript, readable on a phone.
package webview

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/ledger"
)

// ScaleUp is one upcoming scheduled scale-up.
type ScaleUp struct {
	Peak string
	// FireTime is when the scale-up is committed; Start when the peak starts.
	FireTime, Start time.Time
	// Targets says what is raised to what: "ScaledObject/vllm-qwen spec.minReplicaCount → 4".
	Targets string
}

// Source is what the pages show.
type Source interface {
	// Envs lists the audited environments.
	Envs() []string
	// Revision is the Git revision an env was last audited at, and the audit's error if it failed.
	Revision(env string) (string, error)
	// Open and Ended are the env's drift episodes (see episode.Book); env "" is every env.
	Open(env string) []episode.Episode
	Ended(env string, n int) []episode.Episode
	// Serving is what the env serves at its audited revision (the model ledger's view).
	Serving(env string) ([]ledger.Serving, error)
	// Upcoming lists the env's next n scheduled scale-ups (none without a schedule).
	Upcoming(env string, n int) ([]ScaleUp, error)
	// Blame is the history of one object: per field the commit that set it in Git, its drift,
	// and the writes to the live object.
	// cluster is the object's cluster ("" for Argo CD's own).
	Blame(ctx context.Context, env, cluster, kind, namespace, name string) (*blame.Blame, error)
}

//go:embed templates/*.html
var templates embed.FS

// Handler serves GET / (the overview) and GET /blame?env=&kind=&namespace=&name=[&cluster=].
func Handler(src Source, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	now := time.Now
	funcs := template.FuncMap{
		"short":    gitrepo.Short,
		"value":    func(v any) string { return notify.FormatValue(v) },
		"percent":  func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) + "%" },
		"when":     func(t time.Time) string { return t.Format("Mon 2 Jan 15:04 MST") },
		"who":      who,
		"ended":    endedText,
		"age":      func(e episode.Episode) string { return roundDuration(e.Duration(now())) },
		"blameURL": blameURL,
		"date":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
		"stamp":    stamp,
		"person":   person,
		"plural": func(n int, what string) string {
			if n == 1 {
				return "1 " + what
			}
			return strconv.Itoa(n) + " " + what + "s"
		},
	}
	pages := template.Must(template.New("").Funcs(funcs).ParseFS(templates, "templates/*.html"))
	v := &view{src: src, pages: pages, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.index)
	mux.HandleFunc("GET /blame", v.blame)
	return mux
}

type view struct {
	src   Source
	pages *template.Template
	log   *slog.Logger
}

// envView is one env on the overview.
type envView struct {
	Name     string
	Revision string
	Error    string
	Open     []episode.Episode
	Serving  []ledger.Serving
	Upcoming []ScaleUp
}

func (v *view) index(w http.ResponseWriter, r *http.Request) {
	data := struct {
		Title string
		Envs  []envView
		Ended []episode.Episode
	}{Title: "Drift", Ended: v.src.Ended("", 20)}
	for _, env := range v.src.Envs() {
		ev := envView{Name: env, Open: v.src.Open(env)}
		rev, err := v.src.Revision(env)
		ev.Revision = rev
		if err != nil {
			ev.Error = "last audit failed: " + err.Error()
		}
		if ev.Serving, err = v.src.Serving(env); err != nil {
			v.log.Debug("web view: serving", "env", env, "err", err)
		}
		if ev.Upcoming, err = v.src.Upcoming(env, 3); err != nil {
			v.log.Debug("web view: schedule", "env", env, "err", err)
		}
		data.Envs = append(data.Envs, ev)
	}
	v.render(w, "index.html", data)
}

func (v *view) blame(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	env, kind, ns, name, cluster := q.Get("env"), q.Get("kind"), q.Get("namespace"), q.Get("name"), q.Get("cluster")
	if env == "" || kind == "" || name == "" {
		http.Error(w, "blame needs env, kind and name (namespace for namespaced kinds)", http.StatusBadRequest)
		return
	}
	res, err := v.src.Blame(r.Context(), env, cluster, kind, ns, name)
	data := struct {
		Title                string
		Env, Kind, Namespace string
		Name, Cluster        string
		Blame                any
		Error                string
		Open                 []episode.Episode
		Ended                []episode.Episode
	}{Title: kind + "/" + name, Env: env, Kind: kind, Namespace: ns, Name: name, Cluster: cluster, Blame: res}
	if err != nil {
		data.Error = err.Error()
	}
	same := func(e episode.Episode) bool {
		return e.Cluster == cluster && strings.EqualFold(e.Kind, kind) && e.Name == name && (ns == "" || e.Namespace == ns)
	}
	for _, e := range v.src.Open(env) {
		if same(e) {
			data.Open = append(data.Open, e)
		}
	}
	for _, e := range v.src.Ended(env, 0) {
		if same(e) && len(data.Ended) < 20 {
			data.Ended = append(data.Ended, e)
		}
	}
	v.render(w, "blame.html", data)
}

func (v *view) render(w http.ResponseWriter, page string, data any) {
	var b strings.Builder
	if err := v.pages.ExecuteTemplate(&b, page, data); err != nil {
		v.log.Error("web view", "page", page, "err", err)
		http.Error(w, "page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	_, _ = fmt.Fprint(w, b.String())
}

// who names the person and tool behind an episode: "alice (kubectl-edit)", "kubectl-edit",
// "unknown".
func who(e episode.Episode) string {
	switch {
	case e.Actor != nil && e.Writer.Manager != "":
		return e.Actor.User + " (" + e.Writer.Manager + ")"
	case e.Actor != nil:
		return e.Actor.User
	case e.Writer.Manager != "":
		return e.Writer.Manager
	}
	return "unknown"
}

// endedText says how an episode ended, as the resolution notice in chat does.
func endedText(e episode.Episode) string {
	r := notify.ResolutionOf(e)
	if r == nil {
		return ""
	}
	r.Measured = false // the Lasted column says it
	if s := r.Summary(); s != "" {
		return s
	}
	return e.End.How
}

// blameURL links an episode's object to its blame page.
func blameURL(e episode.Episode) string {
	q := url.Values{"env": {e.Env}, "kind": {e.Kind}, "name": {e.Name}}
	if e.Namespace != "" {
		q.Set("namespace", e.Namespace)
	}
	if e.Cluster != "" {
		q.Set("cluster", e.Cluster)
	}
	return "blame?" + q.Encode()
}

// roundDuration renders a duration to the second below an hour, to the minute above.
func roundDuration(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// stamp renders an RFC 3339 time as "2006-01-02 15:04:05" (as it is when it does not parse).
func stamp(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// person names who made a drifted field: "alice (kubectl-edit)", the tool alone without audit
// events, "unknown" when neither is known.
func person(f drift.Field) string {
	switch {
	case f.Actor != nil && f.Manager != "":
		return f.Actor.User + " (" + f.Manager + ")"
	case f.Actor != nil:
		return f.Actor.User
	case f.Manager != "":
		return f.Manager
	}
	return "unknown"
}
