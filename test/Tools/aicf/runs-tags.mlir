// Tags, notes, deletion and JSON in the run registry: `aicf runs tag|note|
// delete`, `runs list --tag`, `runs list --json` and `runs show --json`.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/a --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr 0.05 --out %t/b --checkpoint-dir %t/bck --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr 0.2 --out %t/c --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf runs tag 2 baseline lr-sweep --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=TAGGED
// RUN: aicf runs tag 3 lr-sweep --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf runs tag 2 baseline --remove --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=UNTAGGED
// TAGGED: run 2: tags baseline, lr-sweep
// UNTAGGED: run 2: tags lr-sweep
// A tag with a space, and a run that is not there, are refused by name.
// RUN: not aicf runs tag 2 "two words" --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=BADTAG
// RUN: not aicf runs tag 9 x --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=NOSUCH
// BADTAG: aicf: error: tag "two words": a tag holds no spaces, commas, control or invisible characters (found ' ')
// NOSUCH: aicf: error: {{.*}}runs.sqlite: run registry: no run 9
// RUN: aicf runs note 3 "diverged early: lr too high" --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf runs list --tag lr-sweep --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=BYTAG
// BYTAG: id  status {{.*}}  epochs  tags
// BYTAG-NEXT: 2  finished {{.*}}  lr-sweep
// BYTAG-NEXT: 3  finished {{.*}}  lr-sweep
// BYTAG-NEXT: 2 of the 3 runs in {{.*}}runs.sqlite, tagged lr-sweep
// RUN: aicf runs show 3 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=SHOWNOTE
// SHOWNOTE: run 3: finished
// SHOWNOTE-NEXT: tags: lr-sweep
// SHOWNOTE-NEXT: note: diverged early: lr too high
// RUN: aicf runs compare 1 3 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=COMPARETAGS
// COMPARETAGS: tags {{ *}}- lr-sweep
// JSON: the rows as `runs list` selects them, a run's whole record.
// RUN: aicf runs list --json --tag lr-sweep --runs-db %t/runs.sqlite | python3 -c "import json, sys; rows = json.load(sys.stdin); print([(r['id'], r['tags'], r.get('note'), r['settings']['lr']) for r in rows])" | FileCheck %s --check-prefix=LISTJSON
// LISTJSON: [(2, ['lr-sweep'], None, 0.05), (3, ['lr-sweep'], 'diverged early: lr too high', 0.2)]
// RUN: aicf runs show 2 --json --runs-db %t/runs.sqlite | python3 -c "import json, sys; d = json.load(sys.stdin); print(d['run']['id'], d['seed'], len(d['curve']), d['curve'][0]['epoch'], d['run']['best_val_loss'] == d['curve'][0]['val_loss'])" | FileCheck %s --check-prefix=SHOWJSON
// SHOWJSON: 2 0 1 1 True
// RUN: aicf runs note 3 --clear --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=CLEARED
// CLEARED: run 3: no note
// Deleting: the run's rows go (all or none), its checkpoints stay, and its
// id is not given again.
// RUN: aicf runs delete 2 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=DELETED
// DELETED: deleted run 2 (its checkpoints in {{.*}}bck are left)
// RUN: test -f %t/bck/last.safetensors
// RUN: not aicf runs delete 1 2 --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=DELETEGONE
// DELETEGONE: aicf: error: {{.*}}runs.sqlite: run registry: no run 2
// RUN: aicf runs list --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=AFTERDELETE
// AFTERDELETE: 1  finished
// AFTERDELETE-NEXT: 3  finished
// AFTERDELETE-NEXT: 2 runs in
// RUN: aicf runs delete 3 --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/d --runs-db %t/runs.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/runs.sqlite'); print([r[0] for r in c.execute('SELECT id FROM runs')], c.execute('SELECT COUNT(*) FROM curve WHERE run_id IN (2, 3)').fetchone()[0], c.execute('SELECT COUNT(*) FROM tags').fetchone()[0])" | FileCheck %s --check-prefix=NOREUSE
// NOREUSE: [1, 4] 0 0
// A run recorded as running by a live process (here pid 1) is not deleted
// without --force.
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/runs.sqlite'); c.execute(\"UPDATE runs SET status = 'running', pid = 1 WHERE id = 4\"); c.commit()"
// RUN: not aicf runs delete 1 4 --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=LIVE
// LIVE: aicf: error: {{.*}}runs.sqlite: run 4: process 1 is still running it; stop it first, or delete it with --force
// RUN: aicf runs list --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=ALLORNONE
// ALLORNONE: 1  finished
// ALLORNONE-NEXT: 4  running
// RUN: aicf runs delete 4 --force --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=FORCED
// FORCED: deleted run 4
// A registry of an earlier AICF (no tags or notes tables) lists as before,
// and takes a tag.
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/runs.sqlite'); c.execute('DROP TABLE tags'); c.execute('DROP TABLE notes'); c.commit()"
// RUN: aicf runs list --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=OLDLIST
// OLDLIST: 1  finished
// OLDLIST-NEXT: 1 runs in
// RUN: aicf runs tag 1 kept --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=OLDTAG
// OLDTAG: run 1: tags kept
// A deleted run's checkpoint, resumed where an earlier AICF gave its id to
// another run (it did not know the ids deleted: here that row is made by
// hand, a copy of run 1 numbered 2), records a row of its own: it went on
// in the other run's row (same model and seed), its command added there.
// RUN: rm -f %t/reuse.sqlite
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/r1 --runs-db %t/reuse.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/r2 --checkpoint-dir %t/r2ck --runs-db %t/reuse.sqlite > /dev/null
// RUN: aicf runs delete 2 --runs-db %t/reuse.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/reuse.sqlite'); c.execute('CREATE TEMP TABLE t AS SELECT * FROM runs WHERE id = 1'); c.execute('UPDATE t SET id = 2'); c.execute('INSERT INTO runs SELECT * FROM t'); c.commit()"
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --resume --out %t/r2 --checkpoint-dir %t/r2ck --runs-db %t/reuse.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/reuse.sqlite'); print([(i, cmd.count(chr(10))) for i, cmd in c.execute('SELECT id, command FROM runs ORDER BY id')])" | FileCheck %s --check-prefix=OWNROW
// OWNROW: [(1, 0), (2, 0), (3, 0)]
// A tag that starts as an option does, or holds an invisible character,
// is refused; a note of two lines keeps its indent.
// RUN: not aicf runs tag 1 --runs-db %t/reuse.sqlite -- -neg 2>&1 | FileCheck %s --check-prefix=DASHTAG
// DASHTAG: aicf: error: tag "-neg": a tag does not start with '-'
// RUN: not aicf runs tag 1 "zero$(printf '\342\200\213')width" --runs-db %t/reuse.sqlite 2>&1 | FileCheck %s --check-prefix=INVISIBLE
// INVISIBLE: aicf: error: tag "zero\u{200b}width": a tag holds no spaces, commas, control or invisible characters (found '\u{200b}')
// RUN: aicf runs note 1 "$(printf 'first line\nsecond line')" --runs-db %t/reuse.sqlite > /dev/null
// RUN: aicf runs show 1 --runs-db %t/reuse.sqlite | FileCheck %s --check-prefix=TWOLINES
// TWOLINES: note: first line
// TWOLINES-NEXT: {{^        }}second line
