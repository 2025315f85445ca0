#!/usr/bin/env bash
# make demo: the main job end to end on a local real cluster, real Argo CD and a local Git server.
#  1. etcd, kube-apiserver, scheduler, controller-manager, kwok nodes for the three pools, and Argo CD
#     (application controller, repo-server, Redis) syncing clusters/prod from a local Git repository
#  2. the daemon watching prod and posting to a local chat endpoint
#  3. manual kubectl edits: one Argo CD reverts (selfHeal), one it cannot see
#  4. the auditor's drift report naming field, values, manager, time
#  5. a scheduled pre-peak scale-up as a Git commit that Argo CD syncs (replicas rise on kwok nodes)
#  6. the model ledger, a canary share change and its rollback by `git revert`, synced back
set -eu # no pipefail: output is cut with sed -n (which reads it all, so no auditor command is cut short by SIGPIPE)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d /tmp/auditor-demo.XXXXXX)
cluster="$work/cluster"
go build -o "$work/testcluster" ./cmd/testcluster
tc() { "$work/testcluster" "$@"; }
# Every background process runs through procs_start, in a process group of its own; on exit,
# error, Ctrl-C, TERM or HUP the library stops the groups, then runs cleanup: tc up's cluster
# processes (sessions of their own, with pid files) are stopped by tc down.
. "$root/hack/lib/procs.sh"
cleanup() {
  tc down --dir "$cluster" >/dev/null 2>&1 || true
  [ -n "${KEEP_DEMO:-}" ] || rm -rf "$work"
}
procs_at_cleanup cleanup
begin=$SECONDS
step() { printf '\n\033[1m== %s\033[0m  (%ss)\n' "$*" "$((SECONDS-begin))"; }

# synced REV: wait until Argo CD's llm-prod is Synced at REV (asking it to look at Git now): its
# automated sync applied what REV changes, or REV changed nothing it deploys (a ledger record).
synced() {
  kubectl -n argocd annotate application llm-prod argocd.argoproj.io/refresh=normal --overwrite >/dev/null
  for _ in $(seq 1 240); do
    got=$(kubectl -n argocd get application llm-prod -o jsonpath='{.status.sync.status} {.status.sync.revision} {.status.operationState.phase}')
    case "$got" in "Synced $1 Succeeded") echo "Argo CD: llm-prod Synced at ${1:0:8}"; return 0 ;; esac
    sleep 0.5
  done
  echo "Argo CD did not sync ${1:0:8} in 2 min: $got"; exit 1
}
main() { git --git-dir "$cluster/git/platform.git" rev-parse main; }
# pin: the commit prod runs (apps/prod/release.yaml on main).
pin() { git --git-dir "$cluster/git/platform.git" show main:apps/prod/release.yaml | awk '$1 == "revision:" {print $2}'; }
# root_synced: wait until root-prod (apps/prod: llm-prod itself, its pin and patches) is Synced at main.
root_synced() {
  kubectl -n argocd annotate application root-prod argocd.argoproj.io/refresh=normal --overwrite >/dev/null
  for _ in $(seq 1 240); do
    got=$(kubectl -n argocd get application root-prod -o jsonpath='{.status.sync.status} {.status.sync.revision} {.status.operationState.phase}')
    case "$got" in "Synced $(main) Succeeded") return 0 ;; esac
    sleep 0.5
  done
  echo "Argo CD did not sync root-prod to main in 2 min: $got"; exit 1
}
# chat N PATTERN: wait until the chat log holds N messages matching PATTERN.
chat() {
  for _ in $(seq 1 600); do
    [ "$(grep -c "$2" "$work/chat.log" 2>/dev/null || true)" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "(no chat message matching '$2' after 60 s; daemon log:)"; tail -20 "$work/daemon.log"
}

step "1. A real cluster: control plane, kwok nodes for three pools, Argo CD syncing clusters/prod from local Git"
tc up --dir "$cluster" --env prod 2>&1 | grep -E "^(starting|adding|bootstrapped|Argo CD|local cluster)" | sed 's/^/  /'
export KUBECONFIG="$cluster/kubeconfig"
repo="file://$cluster/git/platform.git"
kubectl get applications -n argocd
kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.labels.platform\.llm/pool} {.status.conditions[?(@.type=="Ready")].type}={.status.conditions[?(@.type=="Ready")].status} gpus={.status.allocatable.nvidia\.com/gpu} taints={.spec.taints[*].key}{"\n"}{end}' |
  sort | uniq -c | awk '{print "  " $1 " nodes, pool " $2 ": " $3 " " $4 " " $5}' 
echo "vLLM pods, on the GPU pool:"
kubectl -n llm-inference get pods -o wide --no-headers | awk '{print "  " $1 "\t" $3 "\t" $7}'

step "2. The daemon: auditor serve watches prod and posts to chat"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport); dport=$(freeport)
# The binary itself, not the tc function: procs_start runs programs (setsid cannot run a function).
procs_start "$work/testcluster" receive --listen "127.0.0.1:$port" > "$work/chat.log" 2>&1
printf 'http://127.0.0.1:%s/hooks/demo' "$port" > "$work/mm-url"
cat > "$work/auditor.yaml" <<CFG
repo: $repo
envs: [prod]
kubeconfig: $KUBECONFIG
listen: 127.0.0.1:$dport
stateDir: $work/state
foldWindow: 2s
auditEvents: {file: $cluster/audit.log}   # the API server's audit log: who made each edit
sinks:
  - name: oncall
    mattermost: {urlFile: $work/mm-url}
CFG
procs_start bin/auditor serve --config "$work/auditor.yaml" > "$work/daemon.log" 2>&1
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$dport/readyz" >/dev/null && break; sleep 0.1; done
echo "daemon ready: first audit done, prod in sync"
# Offline (as CI and air-gapped sites without a mirror of NVIDIA's charts, site value nvidiaCharts),
# neither Argo CD nor the auditor can fetch the GPU Operator chart. The auditor then says so once,
# as what it is: not drift, every other Application audited. Online, there is nothing to say.
for _ in $(seq 1 50); do grep -q "Not audited in prod" "$work/chat.log" 2>/dev/null && break; sleep 0.1; done
if grep -q "Not audited in prod" "$work/chat.log" 2>/dev/null; then
  echo "chat (this machine is offline, as an air-gapped site without a chart mirror: the one Application it cannot audit):"
  grep -E "Not audited|Cause|Meaning|Runbook" "$work/chat.log" | head -4 | cut -c1-160 | sed 's/^/  /'
fi
seen=$(wc -l < "$work/chat.log")

step "3. Manual edits with the real kubectl, by alice and bob (token users of the local cluster)"
printf '#!/bin/sh\nsed -i "s/^  replicas: 1$/  replicas: 3/" "$1"\n' > "$work/editor" && chmod +x "$work/editor"
echo '$ kubectl --context alice -n llm-rag edit statefulset qdrant      (an editor script turns replicas 1 into 3)'
EDITOR="$work/editor" kubectl --context alice -n llm-rag edit statefulset qdrant
echo '$ kubectl --context bob -n llm-api set env deployment/rag-api LOG_LEVEL=debug'
kubectl --context bob -n llm-api set env deployment/rag-api LOG_LEVEL=debug
chat 1 "Resolved in prod"
echo "chat (Argo CD's selfHeal put qdrant back; the daemon says who and how fast):"
tail -n +"$((seen+1))" "$work/chat.log" | sed -n '/┌──/,$p' | grep -vE 'argocd app sync|auditor render|kubectl apply|^│ *$|```|^│ [-+@ ]|diff --git|^│ (index|---|[+][+][+])' | head -40 | sed 's/^/  /'
echo "Argo CD's view of rag-api (an added env var is outside what its diff compares):"
kubectl -n argocd get application llm-prod -o jsonpath='{range .status.resources[?(@.name=="rag-api")]}  {.kind} {.name}: {.status}{"\n"}{end}'

step "4. auditor diff --env prod --audit-log: what Git says against what runs, and who changed it"
set +e
bin/auditor diff --env prod --repo "$repo" --kubeconfig "$KUBECONFIG" --audit-log "$cluster/audit.log"
code=$?
set -e
echo "(exit code $code: 0 in sync, 1 drift, >1 error)"
echo
echo '$ auditor blame statefulset/qdrant --env prod --audit-log ...   (the commit behind each field; the writes, by whom)'
bin/auditor blame statefulset/qdrant -n llm-rag --env prod --repo "$repo" --kubeconfig "$KUBECONFIG" --audit-log "$cluster/audit.log" 2>&1 |
  grep -E '^(StatefulSet|history|live:|FIELD|writes)|spec.replicas|  TIME|alice|bob' | sed -n 1,14p | cut -c1-150 | sed 's/^/  /'
echo
echo "The daemon's episodes (GET /api/v1/episodes, as alice once granted llm-auditor-api-reader):"
kubectl create clusterrolebinding demo-alice-reads-auditor --clusterrole=llm-auditor-api-reader --user=alice >/dev/null
token=$(kubectl config view --raw -o jsonpath='{.users[?(@.name=="alice")].user.token}')
curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$dport/api/v1/episodes?env=prod" |
  python3 -c 'import json,sys; r=json.load(sys.stdin)
for e in r["ended"]: print("  ended: %s/%s %s by %s: %s" % (e["kind"], e["name"], e.get("path",""), (e.get("actor") or {}).get("user", e["writer"]["manager"]), e["end"]["how"]))
for e in r["open"]: print("  open:  %s/%s %s by %s" % (e["kind"], e["name"], e.get("path",""), (e.get("actor") or {}).get("user", e["writer"]["manager"])))'
echo "The same, with the models served and the next scale-ups, in a browser: http://127.0.0.1:$dport/ (bearer token required)"

step "5. A scheduled pre-peak scale-up, written as a Git commit and synced by Argo CD"
pin=$(pin)
echo "prod is pinned to ${pin:0:8} (apps/prod/release.yaml); a scale-up goes into llm-prod's kustomize patches, on main:"
echo '$ auditor schedule fire --env prod --peak payday     (rag-api HPA minReplicas 3 -> 6)'
bin/auditor schedule fire --env prod --peak payday --repo "$repo" 2>&1 | sed -n 1,4p | sed 's/^/  /'
git --git-dir "$cluster/git/platform.git" show main -- apps/prod/llm-prod.yaml | grep '^[+]' | grep -v '^+++' | sed 's/^/  /'
root_synced
for _ in $(seq 1 120); do [ "$(kubectl -n llm-api get deploy rag-api -o jsonpath='{.status.readyReplicas}')" = 6 ] && break; sleep 0.5; done
kubectl -n llm-api get hpa rag-api -o jsonpath='  hpa rag-api: minReplicas {.spec.minReplicas}, maxReplicas {.spec.maxReplicas}{"\n"}'
kubectl -n llm-api get deploy rag-api -o jsonpath='  deployment rag-api: {.status.readyReplicas} ready of {.spec.replicas}{"\n"}'
kubectl -n llm-api get pods -l app.kubernetes.io/name=rag-api -o wide --no-headers | awk '{print "  " $1 "\t" $3 "\t" $7}'

step "6. The model ledger, a canary share change, and its rollback by git revert"
bin/auditor ledger sync --env prod --repo "$repo" 2>&1 | tail -2 | sed 's/^/  /'
git clone -q "$repo" "$work/clone"
( cd "$work/clone" && sed -i 's/weight: 90/weight: 50/; s/weight: 10$/weight: 50/' overlays/prod/canary/route-split.yaml &&
  git -c user.name=alice -c user.email=alice@example.com commit -qam "qwen canary: 50% of traffic" && git push -q origin main )
canary=$(main)
echo "alice pushed ${canary:0:8}: qwen canary 10% -> 50%. prod still runs ${pin:0:8}; it gets the change by promotion:"
echo "Each promotion runs auditor check's rules on the env it moves. Without --direct it goes to a branch"
echo "for review; the demo has no forge to merge one, so it commits on main with --direct:"
echo '$ auditor promote --from dev --to staging --direct; auditor promote --from staging --to prod --direct'
bin/auditor promote --from dev --to staging --direct --repo "$repo" 2>&1 | sed -n 1p | sed 's/^/  /'
bin/auditor promote --from staging --to prod --direct --repo "$repo" 2>&1 | grep -E '^(promote|check|committed|[~+-] |    \.spec)|ledger' | sed -n 1,10p | sed 's/^/  /'
promotion=$(git --git-dir "$cluster/git/platform.git" log -1 --format=%H --grep '^promote staging' main)
root_synced
synced "$canary"
kubectl -n llm-inference get httproute qwen -o jsonpath='  live weights: {range .spec.rules[0].backendRefs[*]}{.name}={.weight} {end}{"\n"}'
echo '$ auditor rollback '"${promotion:0:8}"' --env prod     (git revert of the promotion: prod runs '"${pin:0:8}"' again)'
bin/auditor rollback "$promotion" --repo "$repo" --env prod 2>&1 | sed -n 1,4p | sed 's/^/  /'
root_synced
synced "$pin"
kubectl -n llm-inference get httproute qwen -o jsonpath='  live weights: {range .spec.rules[0].backendRefs[*]}{.name}={.weight} {end}{"\n"}'
echo '$ auditor ledger list --env prod'
bin/auditor ledger list --env prod --repo "$repo" 2>&1 | tail -6 | sed 's/^/  /'

step "7. The gate: a change that breaks prod is caught at the pull request and at the promotion"
( cd "$work/clone" && git pull -q origin main &&
  sed -i 's/maxReplicaCount: 8$/maxReplicaCount: 80/' overlays/prod/scaling.yaml &&
  git -c user.name=bob -c user.email=bob@example.com commit -qam "prod: qwen up to 80 replicas" )
echo "bob's pull request raises vllm-qwen's maxReplicaCount in prod's overlay from 8 to 80. prod runs its pin,"
echo "so nothing changes there today; its next promotion would need 88 GPUs of a pool of 16:"
echo '$ auditor check --base HEAD~1        (in bob'"'"'s clone)'
set +e
bin/auditor check --repo "$work/clone" --base HEAD~1 2>/dev/null | grep -E '^==|VIOLATION' | sed -n 1,6p | cut -c1-160
echo "  exit code: ${PIPESTATUS[0]}"
( cd "$work/clone" && git push -q origin main )
echo "Merged anyway (no CI here). The promotion that would carry it to prod is refused, and nothing is written:"
echo '$ auditor promote --from dev --to prod --skip-stage --direct'
bin/auditor promote --from dev --to prod --skip-stage --direct --repo "$repo" > "$work/promote.out" 2>&1
code=$?
grep -E '^(check|  VIOLATION|promotion refused)' "$work/promote.out" | cut -c1-160 | sed 's/^/  /'
echo "  exit code: $code; prod's pin is still ${pin:0:8}: $(pin | cut -c1-8)"
set -e

step "Done in $((SECONDS-begin))s; stopping the cluster"
