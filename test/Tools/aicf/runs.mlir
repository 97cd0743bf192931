// The run registry: `aicf train --runs-db` records each run (its model's
// structure, its problem, its settings, its held-out loss against FLOPs,
// its growth decisions with the IR before and after, its outcome), and
// `aicf runs list|show|compare|schema` read it. A FLOPs budget ends a run
// within the epoch that spends it. A failed run is recorded as failed.
// RUN: rm -rf %t && mkdir -p %t
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/a --runs-db %t/runs.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 9 --out %t/b --runs-db %t/runs.sqlite --adapt %S/inputs/grow-steps.toml --flops-budget 3e7 | FileCheck %s --check-prefix=BUDGET
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --lr 1e30 --epochs 1 --out %t/c --runs-db %t/runs.sqlite 2> /dev/null
// RUN: aicf runs list --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=LIST
// One problem's runs, best first, the first of them; a failed run has no
// loss, so it comes last.
// RUN: aicf runs list --runs-db %t/runs.sqlite --problem dig --sort loss --limit 1 | FileCheck %s --check-prefix=LISTTOP
// RUN: aicf runs list --runs-db %t/runs.sqlite --sort loss | FileCheck %s --check-prefix=LISTLOSS
// RUN: aicf runs list --runs-db %t/runs.sqlite --problem shakespeare | FileCheck %s --check-prefix=LISTNONE
// LISTTOP: id  status
// LISTTOP-NEXT: {{[12]}}  finished
// LISTTOP-NEXT: 1 of the 3 runs in {{.*}}runs.sqlite, of problems named *dig*
// LISTLOSS: 3  failed
// LISTLOSS-NEXT: 3 runs in
// LISTNONE: id  status
// LISTNONE-NEXT: 0 of the 3 runs in {{.*}}, of problems named *shakespeare*
// Another program's SQLite database is no registry: read commands and
// training leave it as it is (list used to create the registry's tables in it).
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/other.sqlite'); c.execute('CREATE TABLE stuff (a)'); c.commit()"
// RUN: not aicf runs list --runs-db %t/other.sqlite 2>&1 | FileCheck %s --check-prefix=FOREIGN
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/f --runs-db %t/other.sqlite 2>&1 | FileCheck %s --check-prefix=FOREIGNTRAIN
// RUN: python3 -c "import sqlite3; print(sqlite3.connect('%t/other.sqlite').execute('SELECT name FROM sqlite_master').fetchall())" | FileCheck %s --check-prefix=UNTOUCHED
// FOREIGN: aicf: error: {{.*}}other.sqlite: not an AICF run registry (another program's database: no AICF schema version in it); left as it is
// FOREIGNTRAIN: note: {{.*}}other.sqlite: not an AICF run registry (another program's database: no AICF schema version in it); left as it is; the run is not recorded
// A file that is not SQLite's (or whose header is damaged) says what to do
// (it was SQLite's words alone), and is left as it is.
// RUN: python3 -c "open('%t/garbage.sqlite', 'wb').write(bytes(range(256)) * 20)"
// RUN: not aicf runs list --runs-db %t/garbage.sqlite 2>&1 | FileCheck %s --check-prefix=GARBAGE
// RUN: python3 -c "import sys; sys.exit(open('%t/garbage.sqlite', 'rb').read() != bytes(range(256)) * 20)"
// GARBAGE: aicf: error: {{.*}}garbage.sqlite: run registry: file is not a database (or its header is damaged): give the registry's own file with --runs-db, or move this one aside to start a new registry there (--no-runs-db records nothing)
// UNTOUCHED: [('stuff',)]
// RUN: aicf runs show 2 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=SHOW
// RUN: aicf runs compare 1 2 --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=COMPARE
// RUN: aicf runs schema | FileCheck %s --check-prefix=SCHEMA
// RUN: not aicf runs show 9 --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not aicf runs list --runs-db %t/nothing.sqlite 2>&1 | FileCheck %s --check-prefix=NODB

// The budget (3e7 FLOPs) ends the run in epoch 3 of 9.
// BUDGET: epoch   3/9
// BUDGET-NOT: epoch   4/9

// (A grown run: its structure as it started and as it ended, its parameters as it ended.)
// LIST: id  status
// LIST-NEXT: 1  finished {{.*}} digits (classification)  mlp 128-10 {{ *}}9610
// LIST-NEXT: 2  finished {{.*}} digits (classification)  mlp 16-10 -> 32-32-32-10 {{ *}}4522
// LIST-NEXT: 3  failed
// LIST-NEXT: 3 runs in

// SHOW: run 2: finished ({{.*}}narrow_mlp.mlir)
// SHOW: problem: digits (classification), input [64], 10 outputs, 1438 rows, label entropy 2.3012, constant 2.3012, probe 0.3124
// SHOW: structure: mlp 16-10, depth 2, 1210 parameters
// SHOW: grown into: mlp 32-32-32-10, depth 4, 4522 parameters
// SHOW: settings: adam lr 0.003 (momentum 0, weight decay 0), fp32, batch 32, 9 epochs, policy {{.*}}grow-steps.toml
// SHOW: epoch     step        FLOPs
// SHOW-NEXT: 1       45
// SHOW-NEXT: 2       90
// SHOW-NEXT: 3      109
// SHOW: decision 0: step 50 (epoch 2): widen fc1 to 32 (net2wider) on step 50 reached -> accepted (1210 -> 2410 parameters, probe loss {{[0-9.]+}} -> {{[0-9.]+}}); IR before and after recorded
// SHOW: decision 1: step 100 (epoch 3): deepen after fc1

// COMPARE: structure {{ *}}mlp 128-10 {{ *}}mlp 16-10
// COMPARE: precision {{ *}}fp32 {{ *}}fp32
// COMPARE: batch {{ *}}32 {{ *}}32
// COMPARE: decisions {{ *}}0 {{ *}}2

// SCHEMA: CREATE TABLE IF NOT EXISTS runs (
// SCHEMA: CREATE TABLE IF NOT EXISTS curve (
// SCHEMA: CREATE TABLE IF NOT EXISTS decisions (

// MISSING: error: {{.*}}runs.sqlite: run registry: no run 9
// NODB: error: {{.*}}nothing.sqlite: no run registry there
// An empty file is no registry, and reading it leaves it empty.
// RUN: rm -f %t-empty.sqlite && touch %t-empty.sqlite
// RUN: not aicf runs list --runs-db %t-empty.sqlite 2>&1 | FileCheck %s --check-prefix=EMPTYDB
// EMPTYDB: aicf: error: {{.*}}empty.sqlite: no run registry there (no file, or an empty one; aicf train records its runs)
// RUN: test ! -s %t-empty.sqlite
// A database with tables named as the registry's but no schema version is
// another program's: read commands refuse it and leave it as it was (they
// used to add the registry's tables and turn on WAL).
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/app.db'); c.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)'); c.execute('CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)'); c.commit()"
// RUN: cp %t/app.db %t/app-before.db
// RUN: not aicf runs list --runs-db %t/app.db 2>&1 | FileCheck %s --check-prefix=FOREIGN2
// RUN: cmp %t/app.db %t/app-before.db
// FOREIGN2: error: {{.*}}app.db: not an AICF run registry
// A directory, and a registry that cannot be looked at, are named as such,
// never taken for "no registry" (propose used to fall back to the default).
// RUN: not aicf runs list --runs-db %t 2>&1 | FileCheck %s --check-prefix=DIRDB
// DIRDB: error: {{.*}}: is a directory; the run registry is a file
// A task whose name is not ASCII lists whole (it used to panic cutting it).
// RUN: cp %t/runs.sqlite %t/unicode.sqlite
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/unicode.sqlite'); c.execute('''UPDATE runs SET problem = json_set(problem, '$.task', 'abcd\u00e9f')'''); c.commit()"
// RUN: aicf runs list --runs-db %t/unicode.sqlite | FileCheck %s --check-prefix=UNICODE
// UNICODE: 1  finished {{.*}} digits (abcdéf)
// A decision's count edited to a negative number is an error naming the
// run and the column (it showed as 18446744073709551615).
// RUN: cp %t/runs.sqlite %t/negative.sqlite
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/negative.sqlite'); c.execute('UPDATE decisions SET step = -1'); c.commit()"
// RUN: not aicf runs check --runs-db %t/negative.sqlite 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: run 2's step is out of range
// A registry given as a file the run itself writes, or in its checkpoint
// directory, is refused before training (the run replaced it, and every
// run in it, with its metrics).
// RUN: mkdir -p %t/clash && cp %t/runs.sqlite %t/clash/metrics.jsonl
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/clash --runs-db %t/clash/metrics.jsonl 2>&1 | FileCheck %s --check-prefix=CLASH
// RUN: aicf runs list --runs-db %t/clash/metrics.jsonl | FileCheck %s --check-prefix=CLASHKEPT
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/clash2 --checkpoint-dir %t/ck --runs-db %t/ck/runs.sqlite 2>&1 | FileCheck %s --check-prefix=CLASHCK
// CLASH: error: {{.*}}metrics.jsonl: the run registry (--runs-db) names a file of the run directory (--out); give the registry another file
// CLASHKEPT: 3 runs in
// CLASHCK: error: {{.*}}runs.sqlite: the run registry (--runs-db) names a file in the checkpoint directory (the run replaces its files)
// A registry another process holds locked past the wait (here its first
// epoch's write fails once as SQLite's lock would): the run says so, trains
// on without waiting again each epoch, and writes every epoch at its end
// (it had recorded nothing more, the run unfinished).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/l0 --runs-db %t/locked.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; q = chr(39); c = sqlite3.connect('%t/locked.sqlite'); c.execute('CREATE TABLE once (n INTEGER)'); c.execute('INSERT INTO once VALUES (0)'); c.execute('CREATE TRIGGER locked BEFORE INSERT ON curve WHEN (SELECT n FROM once) = 0 BEGIN UPDATE once SET n = 1; SELECT RAISE(FAIL, ' + q + 'database is locked' + q + '); END'); c.commit()"
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/l1 --runs-db %t/locked.sqlite --no-progress 2>&1 | FileCheck %s --check-prefix=LOCKED
// RUN: aicf runs show 2 --runs-db %t/locked.sqlite | FileCheck %s --check-prefix=LOCKEDSHOW
// LOCKED: note: {{.*}}locked.sqlite: run registry: database is locked (another process holds it); this run writes its epochs and decisions there at its end
// LOCKED-NOT: run registry
// LOCKED: final held-out
// LOCKEDSHOW: run 2: finished
// LOCKEDSHOW: epoch     step
// LOCKEDSHOW-NEXT: 1 {{.*}}
// LOCKEDSHOW-NEXT: 2 {{.*}}
// LOCKEDSHOW-NEXT: 3 {{.*}}
// Locked already at the run's start (here its row's write fails once as
// SQLite's lock would): the run keeps its records and writes its row, with
// every epoch, at its end (it was not recorded at all).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/s0 --runs-db %t/startlocked.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; q = chr(39); c = sqlite3.connect('%t/startlocked.sqlite'); c.execute('CREATE TABLE once (n INTEGER)'); c.execute('INSERT INTO once VALUES (0)'); c.execute('CREATE TRIGGER locked BEFORE INSERT ON runs WHEN (SELECT n FROM once) = 0 BEGIN UPDATE once SET n = 1; SELECT RAISE(FAIL, ' + q + 'database is locked' + q + '); END'); c.commit()"
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/s1 --checkpoint-dir %t/s1-ck --runs-db %t/startlocked.sqlite --no-progress 2>&1 | FileCheck %s --check-prefix=STARTLOCKED
// RUN: aicf runs show 2 --runs-db %t/startlocked.sqlite | FileCheck %s --check-prefix=STARTLOCKEDSHOW
// STARTLOCKED: note: {{.*}}startlocked.sqlite: run registry: database is locked (another process holds it, past a 30 s wait); this run writes its record there at its end
// STARTLOCKED-NOT: run registry
// STARTLOCKED: note: {{.*}}startlocked.sqlite: the run is recorded as run 2 at its end; its checkpoints, saved before, do not name it, so a resume of them records a row of its own
// STARTLOCKED: final held-out
// STARTLOCKEDSHOW: run 2: finished
// STARTLOCKEDSHOW: epoch     step
// STARTLOCKEDSHOW-NEXT: 1 {{.*}}
// STARTLOCKEDSHOW-NEXT: 2 {{.*}}
// STARTLOCKEDSHOW-NEXT: 3 {{.*}}
// A registry whose writes fail mid-run (here a decision's, as a full disk
// would): the run says so once, trains on, records nothing more there, and
// stays unfinished (it used to wait on every further decision).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/w0 --runs-db %t/failing.sqlite > /dev/null
// RUN: python3 -c "import sqlite3; q = chr(39); c = sqlite3.connect('%t/failing.sqlite'); c.execute('CREATE TRIGGER full BEFORE INSERT ON decisions BEGIN SELECT RAISE(ABORT, ' + q + 'disk full' + q + '); END'); c.commit()"
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/w1 --runs-db %t/failing.sqlite --adapt %S/inputs/grow-steps.toml --no-progress 2>&1 | FileCheck %s --check-prefix=WRITEFAIL
// RUN: aicf runs list --runs-db %t/failing.sqlite | FileCheck %s --check-prefix=WRITEFAILLIST
// WRITEFAIL: note: {{.*}}failing.sqlite: run registry: {{.*}}disk full{{.*}}; this run records nothing more there (it stays unfinished)
// WRITEFAIL-NOT: run registry
// WRITEFAIL: final held-out
// WRITEFAILLIST: 1  finished
// WRITEFAILLIST-NEXT: 2  unfinished
// A row holding a value of the wrong type (text where a count was): list
// names the run and the column and lists the others (one bad row made the
// whole registry unreadable), show names them, and check reads every run,
// not only SQLite's pages.
// RUN: cp %t/runs.sqlite %t/typed.sqlite
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/typed.sqlite'); c.execute('UPDATE runs SET steps = ? WHERE id = 2', ('many',)); c.execute('UPDATE curve SET val_loss = ? WHERE run_id = 1', ('low',)); c.commit()"
// RUN: aicf runs list --runs-db %t/typed.sqlite 2>&1 | FileCheck %s --check-prefix=TYPEDLIST
// RUN: not aicf runs show 1 --runs-db %t/typed.sqlite 2>&1 | FileCheck %s --check-prefix=TYPEDSHOW
// RUN: not aicf runs check --runs-db %t/typed.sqlite 2>&1 | FileCheck %s --check-prefix=TYPEDCHECK
// RUN: aicf runs check --runs-db %t/runs.sqlite | FileCheck %s --check-prefix=CHECKOK
// TYPEDLIST: aicf: note: {{.*}}typed.sqlite: run registry: run 2's steps holds a value of type Text, not what was recorded there; left out of the list
// TYPEDLIST: 1  finished
// TYPEDLIST-NEXT: 3 {{.*}}
// TYPEDLIST-NEXT: 2 runs read in {{.*}}typed.sqlite; more do not (above: `aicf runs check` says what)
// TYPEDSHOW: aicf: error: {{.*}}typed.sqlite: run registry: run 1's val_loss holds a value of type Text, not what was recorded there
// TYPEDCHECK: run 1's val_loss holds
// TYPEDCHECK: run 2's steps holds
// TYPEDCHECK: aicf: error: {{.*}}typed.sqlite: 2 of 3 runs do not read (above); the database itself is whole
// CHECKOK: runs.sqlite: ok (3 runs read)
// A damaged registry (an index's page overwritten; one cut short) is
// reported, not refused at the first bad page: SQLite's findings and how
// many runs still read (it told the user to run `aicf runs check`, itself).
// RUN: cp %t/runs.sqlite %t/damaged.sqlite
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/damaged.sqlite'); q = chr(39); page = c.execute('SELECT rootpage FROM sqlite_master WHERE name = ' + q + 'runs_graph' + q).fetchone()[0]; size = c.execute('PRAGMA page_size').fetchone()[0]; c.close(); f = open('%t/damaged.sqlite', 'r+b'); f.seek((page - 1) * size); f.write(bytes([255]) * size)"
// RUN: not aicf runs check --runs-db %t/damaged.sqlite > %t/damaged.out 2>&1
// RUN: FileCheck %s --check-prefix=DAMAGED < %t/damaged.out
// DAMAGED: damaged.sqlite: SQLite's integrity check finds it damaged:
// DAMAGED-NOT: runs check
// DAMAGED: aicf: error: {{.*}}damaged.sqlite: the file is damaged (SQLite's findings above); 3 of its 3 runs still read whole (their curves and decisions too, as `aicf runs show` reads them; `aicf runs list` lists every row that reads)
// RUN: cp %t/runs.sqlite %t/short.sqlite && python3 -c "open('%t/short.sqlite', 'r+b').truncate(8192)"
// RUN: not aicf runs check --runs-db %t/short.sqlite 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: it reads no further: database disk image is malformed
// SHORT-NOT: runs check
// SHORT: aicf: error: {{.*}}short.sqlite: no run reads (the list of runs does not: run registry: database disk image is malformed); move the file aside

// A resumed run goes on in its own row: one run, started from the model
// it started with, its decisions once (it was a second row, started from
// the checkpoint's grown model, its decisions again). A killed run's
// resume takes the same path (its row said `running`).
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 6 --out %t/r --checkpoint-dir %t/r-ckpt --runs-db %t/resumed.sqlite --adapt %S/inputs/grow-steps.toml > /dev/null
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 9 --out %t/r --checkpoint-dir %t/r-ckpt --runs-db %t/resumed.sqlite --adapt %S/inputs/grow-steps.toml --resume > /dev/null
// RUN: aicf runs list --runs-db %t/resumed.sqlite | FileCheck %s --check-prefix=RESUMED
// RUN: aicf runs show 1 --runs-db %t/resumed.sqlite | FileCheck %s --check-prefix=RESUMEDSHOW
// RESUMED: 1 finished {{.*}} mlp 16-10 {{.*}} 9
// RESUMED-NEXT: 1 runs in
// The resume's settings (the epochs it trained to) and its command, beside
// the first; the decision before the resume keeps its IR (the resume's
// record of it blanked it).
// RESUMEDSHOW: command: {{.*}}aicf train {{.*}} --epochs 6
// RESUMEDSHOW-NEXT: resumed: {{.*}}aicf train {{.*}} --epochs 9 {{.*}} --resume
// RESUMEDSHOW: structure: mlp 16-10
// RESUMEDSHOW: settings: {{.*}}, 9 epochs, policy {{.*}}grow-steps.toml
// RESUMEDSHOW: decision 0: step 50 {{.*}}; IR before and after recorded
// RESUMEDSHOW: decision 1: step 100 {{.*}}; IR before and after recorded
// RESUMEDSHOW-NOT: decision 2

// A fork (resumed from a checkpoint outside its own checkpoint directory)
// is a run of its own: it took over its parent's row, whose epochs then
// mixed the two runs'.
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/f --checkpoint-dir %t/f-ckpt --runs-db %t/resumed.sqlite --adapt %S/inputs/grow-steps.toml --resume-from %t/r-ckpt/v1.safetensors > /dev/null
// RUN: aicf runs list --runs-db %t/resumed.sqlite | FileCheck %s --check-prefix=FORKED
// FORKED: 1 finished {{.*}} mlp 16-10 {{.*}} 9
// FORKED-NEXT: 2 finished {{.*}} 4
// FORKED-NEXT: 2 runs in
// Its row holds its own decisions, not the parent's before the fork (the
// growth at step 50 is run 1's).
// RUN: aicf runs show 2 --runs-db %t/resumed.sqlite | FileCheck %s --check-prefix=FORKSHOW
// FORKSHOW-NOT: step 50
// FORKSHOW: step 100 {{.*}}; IR before and after recorded
// FORKSHOW-NOT: step 50

// A copy of a run's checkpoint directory resumed is a run of its own too:
// it went on in the original's row, whose own resume then wrote over the
// copy's epochs.
// RUN: rm -rf %t/c-ckpt && cp -r %t/r-ckpt %t/c-ckpt && rm -f %t/c-ckpt/.lock
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 11 --out %t/c --checkpoint-dir %t/c-ckpt --runs-db %t/resumed.sqlite --adapt %S/inputs/grow-steps.toml --resume > /dev/null
// RUN: aicf train %S/../../../examples/grow/narrow_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 10 --out %t/r --checkpoint-dir %t/r-ckpt --runs-db %t/resumed.sqlite --adapt %S/inputs/grow-steps.toml --resume > /dev/null
// RUN: aicf runs list --runs-db %t/resumed.sqlite | FileCheck %s --check-prefix=COPIED
// COPIED: 1 finished {{.*}} mlp 16-10 {{.*}} 10
// COPIED-NEXT: 2 finished {{.*}} 4
// COPIED-NEXT: 3 finished {{.*}} 11
// COPIED-NEXT: 3 runs in

// A resume at another batch (--batch) goes on in the run's row (it was a
// row of its own, holding the later epochs alone), and is no growth.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 2 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 3 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress --resume --batch 64 > /dev/null 2>&1
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 4 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress --resume > /dev/null 2>&1
// RUN: aicf runs list --runs-db %t/rebatch.sqlite | FileCheck %s --check-prefix=REBATCH
// RUN: aicf runs show 1 --runs-db %t/rebatch.sqlite | FileCheck %s --check-prefix=REBATCHSHOW
// REBATCH: 1 finished {{.*}} mlp 128-10 {{.*}} 4
// REBATCH-NEXT: 1 runs in
// REBATCHSHOW: resumed: {{.*}} --epochs 3 {{.*}} --batch 64
// REBATCHSHOW-NEXT: resumed: {{.*}} --epochs 4
// REBATCHSHOW-NOT: grown into
// A resume on other data (--override-resume) is a run of its own, on that
// data's problem, its best held-out loss of its own epochs (the row of the
// checkpoint's run took it, and its problem).
// (The other data's labels are shifted, so its held-out loss stays above
// the first data's best: crediting the row with the records' best shows.)
// RUN: python3 -c "import gzip; rows = [l.strip().split(',') for l in gzip.open('%S/../../../data/digits.csv.gz', 'rt').readlines()[:500]]; open('%t/d500.csv', 'w').write(''.join(','.join(r[:-1] + [str((int(r[-1]) + 1) %% 10)]) + chr(10) for r in rows))"
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/d500.csv --epochs 5 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress --resume --override-resume 2>&1 | FileCheck %s --check-prefix=OTHERDATA
// OTHERDATA: note: the run goes on with other data than its checkpoint's: the registry records it as a run of its own
// RUN: aicf runs list --runs-db %t/rebatch.sqlite | FileCheck %s --check-prefix=OTHERLIST
// OTHERLIST: 1 finished {{.*}} digits {{.*}} 4
// OTHERLIST-NEXT: 2 finished {{.*}} d500 {{.*}} 5
// OTHERLIST-NEXT: 2 runs in
// RUN: python3 -c "import sqlite3; c = sqlite3.connect('%t/rebatch.sqlite'); best, = c.execute('SELECT best_val_loss FROM runs WHERE id = 2').fetchone(); own, = c.execute('SELECT MIN(val_loss) FROM curve WHERE run_id = 2').fetchone(); n, = c.execute('SELECT COUNT(*) FROM curve WHERE run_id = 2').fetchone(); first, = c.execute('SELECT best_val_loss FROM runs WHERE id = 1').fetchone(); assert (n, best) == (1, own) and best > first, (n, best, own, first)"
// Nothing left to train on other data: the checkpoint's figures are not
// reported as this data's (they were, as its final held-out loss).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 5 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress --resume --override-resume 2>&1 | FileCheck %s --check-prefix=NOTHINGOTHER
// NOTHINGOTHER: nothing to train
// NOTHINGOTHER-NEXT: note: {{.*}}last.safetensors's held-out figures are of the data it trained on (d500.csv), not of this run's
// NOTHINGOTHER-NOT: final held-out
// A checkpoint directory without its last checkpoint names the latest one
// it holds (the current version's, which held the last's epoch; the one
// before it was named, an epoch back).
// RUN: rm %t/b-ckpt/last.safetensors
// RUN: not aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %t/d500.csv --epochs 6 --out %t/b --checkpoint-dir %t/b-ckpt --runs-db %t/rebatch.sqlite --no-progress --resume 2>&1 | FileCheck %s --check-prefix=LASTGONE
// LASTGONE: b-ckpt/last.safetensors: not here; {{.*}}b-ckpt/v0.safetensors holds epoch 5: --resume-from it goes on from there
// A proposal written over a checkpoint directory's model is refused (it
// replaced the model that its checkpoints hold).
// RUN: cp %t/b-ckpt/model-v0.mlir %t/model-v0.before
// RUN: not aicf propose --data %S/../../../data/digits.csv.gz --runs-db %t/rebatch.sqlite -o %t/b-ckpt/model-v0.mlir 2>&1 | FileCheck %s --check-prefix=OVERMODEL
// RUN: cmp %t/b-ckpt/model-v0.mlir %t/model-v0.before
// OVERMODEL: b-ckpt/model-v0.mlir: the model would overwrite a model of a checkpoint directory

// Runs apart in settings beyond the optimizer, rate and batch (a schedule,
// a clip norm, standardized features) show it: they compared as the same.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/s1 --runs-db %t/settings.sqlite --no-progress > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/s2 --runs-db %t/settings.sqlite --no-progress --lr-schedule cosine --clip-norm 1 --standardize > /dev/null
// RUN: aicf runs compare 1 2 --runs-db %t/settings.sqlite | FileCheck %s --check-prefix=APART
// RUN: aicf runs show 2 --runs-db %t/settings.sqlite | FileCheck %s --check-prefix=APARTSHOW
// APART: seed {{ *}}0 {{ *}}0
// APART: clip norm {{ *}}none {{ *}}1
// APART: lr schedule {{ *}}constant {{ *}}cosine, warm-up 0 steps
// APART: standardized {{ *}}no {{ *}}yes
// APARTSHOW: also: lr schedule cosine, warm-up 0 steps, down to 0.1 x lr; clip norm 1
// APARTSHOW-NEXT: files: out {{.*}}s2, ran in {{.*}}
// A fresh run into an --out holding an earlier run's records says it
// replaces them (they went without a word).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/s2 --runs-db %t/settings.sqlite --no-progress 2>&1 | FileCheck %s --check-prefix=REPLACED
// REPLACED: note: {{.*}}s2/metrics.jsonl held an earlier run's records (epochs up to 1); this run writes its own there, and its plot (give another --out to keep them)

// A registry SQLite cannot open says why a user would care (its words
// alone, "unable to open database file", named no cause): the run goes on
// unrecorded.
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/proc --runs-db /proc/aicf-runs.sqlite --no-progress 2>&1 | FileCheck %s --check-prefix=CANNOTOPEN
// CANNOTOPEN: note: /proc/aicf-runs.sqlite: run registry: unable to open database file: /proc/aicf-runs.sqlite (its directory is missing, read-only or not this user's: give another file with --runs-db; --no-runs-db records nothing); the run is not recorded
// CANNOTOPEN: final held-out accuracy
// Compare shows every setting that differs: momentum and weight decay were
// left out (show had them), and each run's column is as wide as its own
// entries (one long schedule widened them all).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --optimizer sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01 --out %t/m1 --runs-db %t/momentum.sqlite > /dev/null
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --lr-schedule cosine --out %t/m2 --runs-db %t/momentum.sqlite > /dev/null
// RUN: aicf runs compare 1 2 --runs-db %t/momentum.sqlite | FileCheck %s --check-prefix=SETTINGS
// SETTINGS: run {{ *}}1  2
// SETTINGS: lr schedule {{ *}}constant  cosine, warm-up 0 steps, down to 0.1 x lr
// SETTINGS: momentum {{ *}}0.9 (Nesterov)  -
// SETTINGS: weight decay {{ *}}0.01  0
// A run recorded as running whose process id another process has now,
// started after the run (here a sleep started 5 s after it), was killed:
// it is listed unfinished (it read as running for as long as the id was
// taken).
// RUN: aicf train %S/../../../examples/mlp/digits_mlp.mlir --data %S/../../../data/digits.csv.gz --epochs 1 --out %t/p1 --runs-db %t/reused.sqlite > /dev/null
// RUN: sleep 30 & P=$!; python3 -c "import sqlite3, sys; q = chr(39); c = sqlite3.connect('%t/reused.sqlite'); c.execute('UPDATE runs SET status = ' + q + 'running' + q + ', finished = NULL, pid = ?, started = strftime(' + q + '%%Y-%%m-%%dT%%H:%%M:%%SZ' + q + ', ' + q + 'now' + q + ', ' + q + '-5 seconds' + q + ')', (int(sys.argv[1]),)); c.commit()" $P; aicf runs list --runs-db %t/reused.sqlite > %t/reused.out; kill $P
// RUN: FileCheck %s --check-prefix=REUSED < %t/reused.out
// REUSED: 1  unfinished
