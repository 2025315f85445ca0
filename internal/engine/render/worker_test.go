package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// hangEnv names a FIFO: a worker started with it writes its pid there and then hangs, in place
// of rendering, so a test can cancel a render that is certain to be running.
const hangEnv = "RENDER_TEST_WORKER_HANG_FIFO"

// grandchildEnv makes a hanging worker first start a `sleep` (as kustomize starts git for a
// remote base) and write its pid to the FIFO too.
const grandchildEnv = "RENDER_TEST_WORKER_GRANDCHILD"

// parentEnv makes this test binary a daemon stand-in: it starts a render through a Worker (which,
// with hangEnv, hangs) and waits to be killed.
const parentEnv = "RENDER_TEST_WORKER_PARENT"

// serveTestWorker makes this test binary a render worker when a test's Worker started it.
func serveTestWorker() {
	if fifo := os.Getenv(hangEnv); fifo != "" && os.Getenv(WorkerEnv) == "1" {
		pids := strconv.Itoa(os.Getpid())
		if os.Getenv(grandchildEnv) == "1" {
			sleep := exec.Command("sleep", "600")
			if err := sleep.Start(); err == nil {
				pids += " " + strconv.Itoa(sleep.Process.Pid)
			}
		}
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			fmt.Fprintf(f, "%s\n", pids)
			f.Close()
		}
		select {} // until killed
	}
	if os.Getenv(parentEnv) == "1" && os.Getenv(WorkerEnv) == "" {
		workerHook.Store(true)
		files := map[string][]byte{}
		for k, v := range miniRepo {
			files[k] = []byte(v)
		}
		src, err := fromFiles(files, nil, "r1")
		if err == nil {
			_, err = NewWorker().render(context.Background(), src, "prod", false)
		}
		fmt.Fprintf(os.Stderr, "render returned: %v\n", err)
		os.Exit(3)
	}
	ServeWorkerIfChild()
}

func snapshotSource(t *testing.T, files map[string]string, revision string) Source {
	t.Helper()
	snap := &gitrepo.Snapshot{Revision: revision, Files: map[string][]byte{}}
	for k, v := range files {
		snap.Files[k] = []byte(v)
	}
	src, err := FromSnapshot(snap)
	require.NoError(t, err)
	return src
}

// A render through a Worker runs in a child process and gives what the in-process render gives;
// the cache answers the next one without starting another child.
func TestWorkerRendersOutOfProcess(t *testing.T) {
	files := map[string]string{
		"base/app/kustomization.yaml": "resources: [cm.yaml, svc.yaml]\n",
		"base/app/svc.yaml":           "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: llm-api\nspec:\n  ports: [{port: 80}]\n",
	}
	for k, v := range miniRepo {
		if _, ok := files[k]; !ok {
			files[k] = v
		}
	}
	src := snapshotSource(t, files, "r1")
	want, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	require.Len(t, want.Objects, 2)

	c := NewCache("", 2)
	c.Worker = NewWorker()
	got, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Worker.Started(), "one child process rendered")
	assert.Equal(t, want.Digest, got.Digest)
	assert.Equal(t, "overlays/prod", got.Path)
	assert.Equal(t, "r1", got.Revision)
	require.Len(t, got.Objects, len(want.Objects))
	for i := range want.Objects {
		if d := cmp.Diff(want.Objects[i].Object, got.Objects[i].Object); d != "" {
			t.Errorf("object %d (-in process +worker):\n%s", i, d)
		}
	}

	// Another commit with the same content: answered from what the child recorded it read.
	again, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, files, "r2"), Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, want.Digest, again.Digest)
	assert.Equal(t, CacheStats{ByContent: 1, Rendered: 1, InWorker: 1}, c.Stats())
	assert.EqualValues(t, 1, c.Worker.Started(), "a cache hit starts no child")

	// Rendered into a cache and returned as its JSON (what an audit and a daemon's background
	// render do): the cache then answers the commit with the objects the child sent, and a
	// commit with the same content needs no render.
	kept := NewCache("", 2)
	kept.Worker = c.Worker
	res, err := Engine{Cache: kept, Raw: true}.Render(context.Background(), snapshotSource(t, files, "r3"), Target{Name: "prod"})
	require.NoError(t, err)
	assert.Nil(t, res.Objects, "the cache's JSON, not decoded")
	assert.Len(t, res.Raw, len(want.Objects))
	assert.Equal(t, want.Digest, res.Digest)
	assert.EqualValues(t, 2, c.Worker.Started())
	fromCache, ok := kept.ByRevision("prod", "r3")
	require.True(t, ok)
	assert.Equal(t, want.Digest, fromCache.Digest)
	require.Len(t, fromCache.Objects, len(want.Objects))
	for i := range want.Objects {
		if d := cmp.Diff(want.Objects[i].Object, fromCache.Objects[i].Object); d != "" {
			t.Errorf("object %d (-in process +kept from the worker):\n%s", i, d)
		}
	}
	res, err = Engine{Cache: kept, Raw: true}.Render(context.Background(), snapshotSource(t, files, "r4"), Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, want.Digest, res.Digest)
	assert.Equal(t, CacheStats{ByRevision: 1, ByContent: 1, Rendered: 1, InWorker: 1}, kept.Stats())
	assert.True(t, kept.Knows("prod", "r4"))
	// As JSON (what an audit reads, one object at a time): the same objects, none decoded.
	for _, raw := range []func() (*Result, bool){
		func() (*Result, bool) { return kept.ByRevisionRaw("prod", "r4") },
		func() (*Result, bool) {
			return Engine{Cache: kept, Raw: true}.Cached(snapshotSource(t, files, "r5"), Target{Name: "prod"})
		},
	} {
		res, ok := raw()
		require.True(t, ok)
		assert.Nil(t, res.Objects)
		assert.Equal(t, want.Digest, res.Digest)
		require.Len(t, res.Raw, len(want.Objects))
		for i := range want.Objects {
			obj := &unstructured.Unstructured{}
			require.NoError(t, obj.UnmarshalJSON(res.Raw[i]))
			assert.Empty(t, cmp.Diff(want.Objects[i].Object, obj.Object), "object %d", i)
		}
	}
	assert.Equal(t, CacheStats{ByRevision: 2, ByContent: 2, Rendered: 1, InWorker: 1}, kept.Stats())

	// A work tree is rendered by the child from its directory.
	dir := t.TempDir()
	writeTree(t, dir, files)
	fromDir, err := FromDir(dir)
	require.NoError(t, err)
	res, err = Engine{Cache: &Cache{max: 1, entries: map[string][]*cacheEntry{}, Worker: c.Worker}}.Render(context.Background(), fromDir, Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, want.Digest, res.Digest)
	assert.EqualValues(t, 3, c.Worker.Started())
}

// A malformed manifest's error comes back from the child as the in-process render words it:
// naming the file and line, and as a *YAMLError.
func TestWorkerMalformedYAMLNamesFileAndLine(t *testing.T) {
	files := map[string]string{}
	for k, v := range miniRepo {
		files[k] = v
	}
	files["overlays/prod/more.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n   namespace: llm-api\n"
	src := snapshotSource(t, files, "bad")
	_, inProcess := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
	require.Error(t, inProcess)

	c := NewCache("", 2)
	c.Worker = NewWorker()
	_, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	require.Error(t, err)
	assert.EqualValues(t, 1, c.Worker.Started())
	assert.Contains(t, err.Error(), "overlays/prod/more.yaml:5:")
	assert.Equal(t, inProcess.Error(), err.Error())
	var ye *YAMLError
	if assert.True(t, errors.As(err, &ye), "errors.As *YAMLError: %v", err) {
		assert.Equal(t, "overlays/prod/more.yaml", ye.File)
		assert.Equal(t, 5, ye.Line)
	}
}

// A child that dies without answering (here: not a worker at all) is an error that says so,
// with what it wrote on standard error.
func TestWorkerCrashIsAnError(t *testing.T) {
	w := &Worker{Path: "/bin/sh"}
	t.Setenv("ENV", "") // sh reads its script from stdin: the JSON request is not one
	_, err := w.render(context.Background(), snapshotSource(t, miniRepo, "r1"), "prod", false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "render prod: render worker:")
}

// Under a soft memory limit (a container's, through GOMEMLIMIT) the worker gets what this
// process leaves of it, as the container counts both; without one, none.
func TestWorkerShareOfMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	assert.Zero(t, childMemoryLimit())
	debug.SetMemoryLimit(1 << 30)
	got := childMemoryLimit()
	assert.Less(t, got, int64(1<<30), "this process' own use is left out")
	assert.GreaterOrEqual(t, got, int64(1<<28))
}

// An Application's patches (WithPatches) reach the worker: it renders what the patched Source
// renders in process.
func TestWorkerRendersWithPatches(t *testing.T) {
	patches := []Patch{{"patch": "- op: replace\n  path: /data/replicas\n  value: \"9\"\n", "target": map[string]any{"kind": "ConfigMap", "name": "app"}}}
	src, err := snapshotSource(t, miniRepo, "r1").WithPatches("prod", patches)
	require.NoError(t, err)
	want, err := Engine{}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	require.Equal(t, "9", want.Objects[0].Object["data"].(map[string]any)["replicas"])

	c := NewCache("", 2)
	c.Worker = NewWorker()
	got, err := Engine{Cache: c}.Render(context.Background(), src, Target{Name: "prod"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Worker.Started())
	assert.Equal(t, want.Digest, got.Digest)
	if d := cmp.Diff(want.Objects[0].Object, got.Objects[0].Object); d != "" {
		t.Errorf("(-in process +worker):\n%s", d)
	}
	// The plain render is another cache entry, rendered by a second worker.
	plain, err := Engine{Cache: c}.Render(context.Background(), snapshotSource(t, miniRepo, "r1"), Target{Name: "prod"})
	require.NoError(t, err)
	assert.Equal(t, "3", plain.Objects[0].Object["data"].(map[string]any)["replicas"])
	assert.EqualValues(t, 2, c.Worker.Started())
}

// TestWorkerRefusesWithoutTheHook: a program that never called ServeWorkerIfChild would start a
// copy of itself that runs the whole program (a test binary: every test, again and again); the
// Worker refuses with an error saying what to add instead.
func TestWorkerRefusesWithoutTheHook(t *testing.T) {
	workerHook.Store(false)
	t.Cleanup(func() { workerHook.Store(true) })
	src, err := FromDir("../../..")
	require.NoError(t, err)
	_, err = NewWorker().render(context.Background(), src, "dev", false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "never called render.ServeWorkerIfChild")
}

// Renders that give up just as their turn comes pass the slot on: after thousands of waiters,
// urgent or not, cancelled at random, the Worker is idle, with nobody queued and its one slot free.
func TestWorkerCancelledWaitersLeaveNoSlotTaken(t *testing.T) {
	w := &Worker{}
	var wg sync.WaitGroup
	for range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(200))*time.Microsecond)
			defer cancel()
			if w.acquire(ctx, rand.IntN(2) == 0) == nil {
				time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
				w.release()
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, w.acquire(ctx, false), "the slot leaked: queued %d", w.Queued())
	w.release()
	assert.Zero(t, w.Queued())
	w.mu.Lock()
	assert.Zero(t, w.running)
	w.mu.Unlock()
}

// A child's objects are kept as the JSON it sent, decoded only when a caller needs them; what
// would not decode later is refused when it is read, naming the object, instead of being cached.
func TestWorkerStreamRefusesWhatWouldNotDecode(t *testing.T) {
	const header = `{"path":"overlays/prod","digest":"d","count":2}` + "\n"
	const good = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"rag"},"data":{"k":"v"}}` + "\n"
	const trailer = `{"peakRSS":1}` + "\n"
	for name, tc := range map[string]struct{ second, err string }{
		"kept":          {second: good},
		"no kind":       {second: `{"apiVersion":"v1","metadata":{"name":"b"}}` + "\n", err: "object 2 of 2: an object without a kind or an apiVersion"},
		"not an object": {second: `["apiVersion"]` + "\n", err: "object 2 of 2: not a JSON object"},
		"truncated":     {second: `{"apiVersion":"v1","kind":"ConfigMap"` + "\n", err: "object 2 of 2: not JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := readRender(strings.NewReader(header+good+tc.second+trailer), "r1", "prod")
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Nil(t, r.res.Objects, "not decoded when read")
			res, err := r.result()
			require.NoError(t, err)
			require.Len(t, res.Objects, 2)
			assert.Equal(t, "a", res.Objects[1].GetName())
			assert.Equal(t, map[string]any{"k": "v"}, res.Objects[0].Object["data"])
		})
	}
}
