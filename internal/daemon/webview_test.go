package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// browser starts the distribution's Chromium, headless, for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("Chromium is needed for the web view's test: `make browser` installs the distribution's package (%v)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// screenshot saves the page as PNG under dir, and under $WEBVIEW_SCREENSHOTS when set (the
// README's picture is made that way).
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	for _, d := range []string{dir, os.Getenv("WEBVIEW_SCREENSHOTS")} {
		if d != "" {
			require.NoError(t, os.WriteFile(filepath.Join(d, name), png, 0o644))
		}
	}
}

// text is the rendered text of the first element a CSS selector matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return s
}

// TestWebViewInABrowser: a real headless Chromium loads the daemon's overview, which shows
// alice's drift on qdrant (who, the value Git wants, the live value), and follows the object's
// link to its blame page; a phone-sized window gets the same page without horizontal scrolling.
func TestWebViewInABrowser(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	sched, err := os.ReadFile("../../clusters/prod/schedule.yaml")
	require.NoError(t, err)
	require.NoError(t, h.p.Write("clusters/prod/schedule.yaml", string(sched)))
	h.p.Commit("prod: the peak schedule")
	cfg := h.config(t.TempDir())
	cfg.AuditEvents = AuditEventsConfig{File: cluster.AuditLog}
	d := start(t, cfg)
	out, err := editAs("alice", h.p.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	require.NoError(t, err, "%s", out)
	waitFor(t, "alice's episode opens", 30*time.Second, func() (bool, string) {
		eps := d.episodes(t)
		return len(eps.Open) == 1 && eps.Open[0].Actor != nil, jsonOf(eps)
	})

	ctx := browser(t)
	shots := t.TempDir()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate("http://"+d.d.Addr()+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#env-prod`)),
	))
	overview := text(t, ctx, `#env-prod`)
	screenshot(t, ctx, shots, "overview.png")
	for _, want := range []string{"1 open", "StatefulSet/qdrant", ".spec.replicas", "alice (kubectl-edit)",
		"Models served", "vllm-qwen-canary", "10%", "Next scale-ups", "weekday-morning"} {
		assert.Contains(t, overview, want)
	}
	rendered := d.d.ledger.Stats()
	assert.Positive(t, rendered.Rendered, "the models served were rendered")
	assert.Equal(t, rendered.Rendered, rendered.InWorker, "the models served were rendered in render workers, not in the daemon")
	row, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#env-prod tbody tr')[0].cells).map(c => c.innerText)`))
	require.NoError(t, err)
	require.Len(t, row, 6)
	assert.Equal(t, []string{"1", "3"}, []string{row[4], row[5]}, "Git wants 1, the live value is 3")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#env-prod a[href^="blame?"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#drift`)),
	))
	screenshot(t, ctx, shots, "blame.png")
	assert.Contains(t, text(t, ctx, `h1`), "StatefulSet/qdrant")
	assert.Contains(t, text(t, ctx, `#drift`), "alice (kubectl-edit)")
	// Git's side: the commit that set replicas; the live side: alice's write, 1 → 3.
	replicas, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#git tbody tr')).filter(r => r.cells[0].innerText === '.spec.replicas')[0].cells`+
			`.length ? Array.from(Array.from(document.querySelectorAll('#git tbody tr')).filter(r => r.cells[0].innerText === '.spec.replicas')[0].cells).map(c => c.innerText) : []`))
	require.NoError(t, err)
	require.Len(t, replicas, 4, "the blame page has a .spec.replicas row")
	assert.Equal(t, "1", replicas[1], "Git says 1")
	first := h.p.Git("rev-list", "--max-parents=0", "HEAD")
	assert.Contains(t, replicas[2], gitrepo.Short(first)+" dev", "set by the fixture's first commit, not the schedule's")
	assert.Contains(t, replicas[2], ": platform")
	assert.Contains(t, replicas[3], "3 by alice (kubectl-edit)")
	writes := text(t, ctx, `#writes`)
	assert.Contains(t, writes, "alice")
	assert.Contains(t, writes, ".spec.replicas: 1 → 3")

	// On a phone the tables fold into one field per line: nothing is wider than the screen.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate("http://"+d.d.Addr()+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#env-prod`)),
	))
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	require.NoError(t, err)
	screenshot(t, ctx, shots, "phone.png")
	assert.False(t, overflow, "the overview scrolls sideways on a phone")
	t.Logf("screenshots in %s", shots)
}
