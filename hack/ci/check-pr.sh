#!/usr/bin/env bash
# Checks a pull request (GitHub) or a merge request (GitLab) with `auditor check`.
# It posts the report as one comment, updates that comment on each push, and exits as the check
# did: 0 the change passes, 1 it breaks a rule, 2 the check could not run.
#
# Environment:
#   BASE_REF   the target branch (GitHub: github.base_ref; GitLab: CI_MERGE_REQUEST_TARGET_BRANCH_NAME)
#   AUDITOR    an auditor binary to use; without it the auditor is built from the target branch,
#              so a change under review never checks itself
#   FORGE      github or gitlab; detected from GITHUB_ACTIONS or GITLAB_CI
#   GitHub:    GITHUB_TOKEN, GITHUB_API_URL, GITHUB_REPOSITORY, PR_NUMBER
#   GitLab:    AUDITOR_GITLAB_TOKEN (a project access token with the api scope), CI_API_V4_URL,
#              CI_PROJECT_ID, CI_MERGE_REQUEST_IID
# Without a token the report is only printed. A failed post is a warning: the exit code stays the
# check's, so a pull request from a fork (read-only token) still fails on a violation.
set -euo pipefail

: "${BASE_REF:?set BASE_REF to the target branch}"
forge=${FORGE:-}
if [[ -z $forge ]]; then
  if [[ -n ${GITHUB_ACTIONS:-} ]]; then forge=github; elif [[ -n ${GITLAB_CI:-} ]]; then forge=gitlab; fi
fi
marker='<!-- auditor-check -->'
work=$(mktemp -d)
cleanup() {
  if [[ -d $work/base ]]; then git worktree remove --force "$work/base" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

base="origin/$BASE_REF"
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  git fetch -q origin "+refs/heads/$BASE_REF:refs/remotes/origin/$BASE_REF" ||
    { echo "cannot fetch the target branch $BASE_REF from origin" >&2; exit 2; }
fi

auditor=${AUDITOR:-}
if [[ -z $auditor ]]; then
  echo "building the auditor from $base" >&2
  git worktree add -q --detach "$work/base" "$base" || exit 2
  # -trimpath: the build cache does not depend on where the work tree is.
  (cd "$work/base" && go build -trimpath -o "$work/auditor" ./cmd/auditor) || exit 2
  auditor=$work/auditor
fi

status=0
"$auditor" check --base "$base" --head HEAD -o markdown >"$work/report.md" || status=$?
cat "$work/report.md"
if ((status > 1)); then
  echo "auditor check could not run (exit $status)" >&2
  exit "$status"
fi
{ echo "$marker"; cat "$work/report.md"; } >"$work/comment.md"

# post METHOD URL AUTH-HEADER: sends the comment as {"body": ...}.
post() {
  jq -Rs '{body: .}' <"$work/comment.md" |
    curl -fsS -o /dev/null -X "$1" -H "$3" -H 'Content-Type: application/json' --data-binary @- "$2"
}

# existing URL AUTH-HEADER: the id of the comment this script posted before, if any.
existing() {
  curl -fsS -H "$2" "$1?per_page=100" |
    jq -r --arg m "$marker" '[.[] | select(.body | startswith($m))][0].id // empty'
}

# comment: posts the report, or updates the one posted before. Each forge differs only in its
# token, its comments URL, where one comment lives and the method that updates it.
comment() {
  local token list item update id api auth
  case $forge in
  github)
    token=${GITHUB_TOKEN:-}
    api=${GITHUB_API_URL:-https://api.github.com}/repos/$GITHUB_REPOSITORY/issues
    list=$api/$PR_NUMBER/comments item=$api/comments update=PATCH
    auth="Authorization: Bearer $token"
    ;;
  gitlab)
    token=${AUDITOR_GITLAB_TOKEN:-}
    list=$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes
    item=$list update=PUT
    auth="PRIVATE-TOKEN: $token"
    ;;
  *) echo "no forge detected (set FORGE=github or gitlab): the report is not posted" >&2; return 0 ;;
  esac
  [[ -n $token ]] || { echo "no $forge token: the report is not posted" >&2; return 0; }
  id=$(existing "$list" "$auth") || return 1
  if [[ -n $id ]]; then
    post "$update" "$item/$id" "$auth"
  elif ((status != 0)); then
    post POST "$list" "$auth"
  fi
}

# A passing change posts nothing new; it updates an earlier report so that it no longer shows
# violations that are fixed.
comment || echo "warning: the report could not be posted" >&2
exit "$status"
