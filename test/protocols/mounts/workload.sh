#!/usr/bin/env bash
# The everyday workload of a mounted drive (issue 18), run in DIR on a mount, with LOCAL, a folder
# on local disk, as the reference a step's result is compared with. Prints one line per step:
#   STEP <name> ok
#   STEP <name> FAIL <why>
# and nothing else on stdout; the caller asserts every step is ok. TREE is a tar of the tree to
# unpack (600 files in the tests, 2,000 in `npm run bench:mounts`).
#
#   workload.sh DIR LOCAL TREE
set -u
DIR=$1
LOCAL=$2
TREE=$3
export GIT_AUTHOR_NAME=mount GIT_AUTHOR_EMAIL=mount@example.com
export GIT_COMMITTER_NAME=mount GIT_COMMITTER_EMAIL=mount@example.com
mkdir -p "$DIR" "$LOCAL"

# step NAME COMMAND...: runs one step in DIR; its stderr goes to the caller's stderr.
step() {
  local name=$1 out
  shift
  if out=$(cd "$DIR" && "$@" 2>&1); then
    echo "STEP $name ok"
  else
    echo "STEP $name FAIL $(tr '\n' ' ' <<<"$out" | cut -c1-400)"
  fi
}

unpack() {
  tar -xf "$TREE" && tar -xf "$TREE" -C "$LOCAL" && diff -r "$LOCAL/tree" tree
}

git_work() {
  git init -q -b main origin && (cd origin && echo one >a.txt && mkdir -p src &&
    seq 1 500 >src/numbers && git add . && git commit -qm one) &&
    git clone -q origin clone && (cd clone && echo two >>a.txt && git commit -qam two &&
    git fsck --full --strict && test "$(git log --oneline | wc -l)" -eq 2)
}

# edits runs the same byte-level edits here and in LOCAL, then compares.
edits() {
  local d
  for d in . "$LOCAL"; do
    (cd "$d" && seq 1 20000 >edit.bin && printf 'PATCH' | dd of=edit.bin bs=1 seek=7000 conv=notrunc status=none &&
      echo appended >>edit.bin && truncate -s 50000 edit.bin && truncate -s 60001 edit.bin &&
      printf 'END' | dd of=edit.bin bs=1 seek=59000 conv=notrunc status=none) || return 1
  done
  cmp edit.bin "$LOCAL/edit.bin"
}

# overwrite_append: `printf > f; echo >> f` five times, read at once and again 2 s later.
overwrite_append() {
  local i want got
  for i in 1 2 3 4 5; do
    printf 'hello %s\n' "$i" >oa.txt && echo more >>oa.txt || return 1
    want=$(printf 'hello %s\nmore' "$i")
    got=$(cat oa.txt)
    [[ $got == "$want" ]] || { echo "at once: '$got' (want '$want')"; return 1; }
    printf 'first %s\n' "$i" >"oa$i.txt" && echo second >>"oa$i.txt" || return 1
  done
  sleep 2
  for i in 1 2 3 4 5; do
    got=$(cat "oa$i.txt")
    [[ $got == "$(printf 'first %s\nsecond' "$i")" ]] || { echo "2 s later, oa$i.txt: '$got'"; return 1; }
  done
}

replace_file() {
  echo one >r1 && echo two >r2 && mv -f r1 r2 && [[ $(cat r2) == one && ! -e r1 ]]
}

rename_folder() {
  mkdir -p rdir/sub && echo deep >rdir/sub/f && mv rdir rdir2 && [[ $(cat rdir2/sub/f) == deep && ! -e rdir ]]
}

remove_tree() {
  mkdir -p gone/a/b && echo x >gone/a/b/c && echo y >gone/a/d && rm -rf gone && [[ ! -e gone ]]
}

odd_names() {
  local n
  mkdir -p names || return 1
  for n in 'with space' 'é' '日本' '#hash' '100%' 'what?' 'a&b' "quote'"; do
    echo "$n" >"names/$n" && [[ $(cat "names/$n") == "$n" ]] || { echo "name: $n"; return 1; }
  done
  [[ $(ls names | wc -l) -eq 8 ]]
}

rsync_twice() {
  local sent
  rm -rf "$LOCAL/rs" && mkdir -p "$LOCAL/rs" && cp -r "$LOCAL/tree/d1" "$LOCAL/tree/d2" "$LOCAL/rs/" &&
    touch -d '2021-03-04 05:06:07' "$LOCAL/rs/d1/"* &&
    rsync -a "$LOCAL/rs/" rs/ && diff -r "$LOCAL/rs" rs || return 1
  sent=$(rsync -a --stats "$LOCAL/rs/" rs/ | sed -n 's/^Number of regular files transferred: //p')
  [[ $sent == 0 ]] || { echo "the second rsync sent $sent files"; return 1; }
}

copy_times() {
  echo stamped >"$LOCAL/stamped" && touch -d '2020-02-03 04:05:06' "$LOCAL/stamped" &&
    cp -p "$LOCAL/stamped" stamped &&
    [[ $(stat -c %Y stamped) == "$(stat -c %Y "$LOCAL/stamped")" ]] || { echo "cp -p: $(stat -c %y stamped)"; return 1; }
}

touch_time() {
  echo touched >touched && touch -d '2019-01-01 00:00:00' touched && [[ $(stat -c %Y touched) == 1546300800 ]] ||
    { echo "touch -d: $(stat -c %y touched)"; return 1; }
}

save_as() {
  echo 'version 1' >doc.txt && echo 'version 2' >.doc.txt.swp && mv -f .doc.txt.swp doc.txt &&
    [[ $(cat doc.txt) == 'version 2' && ! -e .doc.txt.swp ]]
}

sqlite_rows() {
  local sql='create table t(i integer primary key, v text); begin;' i
  for i in $(seq 1 1000); do sql+="insert into t(v) values('row $i');"; done
  sqlite3 rows.db "$sql commit;" && [[ $(sqlite3 rows.db 'select count(*) from t') == 1000 ]] &&
    [[ $(sqlite3 rows.db 'pragma integrity_check') == ok ]]
}

step unpack unpack
step git git_work
step edits edits
step overwrite-append overwrite_append
step replace-file replace_file
step rename-folder rename_folder
step remove-tree remove_tree
step odd-names odd_names
step rsync-twice rsync_twice
step cp-p copy_times
step touch-d touch_time
step save-as save_as
step sqlite sqlite_rows
