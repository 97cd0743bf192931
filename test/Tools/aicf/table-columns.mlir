// Tables with a header, as pandas and spreadsheets write them: the run
// records its columns, and a table given to predict, eval or a resume
// whose header names other columns, or the same ones in another order, is
// refused (columns are read by position: an id column first fed every
// feature to the wrong input, 98.6% became 51%, without a word). pandas'
// names 0, 1, 2 of a narrow frame, read as a row, are said; a column named
// like the label that is not the last is said; `.CSV.GZ` is gzip too.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import random; r = random.Random(1); rows = [[round(r.uniform(-1, 1), 4) for _ in range(3)] for _ in range(200)]; print('a,b,c,label'); [print(f'{x},{y},{z},{int(x + 2 * y > z)}') for x, y, z in rows]" > %t/train.csv
// RUN: aicf propose --data %t/train.csv -o %t/m.mlir --runs-db %t/runs.sqlite > /dev/null 2>&1
// RUN: aicf train %t/m.mlir --data %t/train.csv --epochs 2 --no-runs-db --no-progress --out %t/run --checkpoint-dir %t/ck > /dev/null
//
// The same columns predict; an id column first, or another order, are refused by name.
// RUN: cut -d, -f1-3 %t/train.csv > %t/features.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p | wc -l | FileCheck %s --check-prefix=ROWS
// ROWS: 200
// RUN: awk -F, 'NR == 1 {print "id," $1 "," $2 "," $3; next} {print NR + 1000 "," $1 "," $2 "," $3}' %t/train.csv > %t/with-id.csv
// RUN: not aicf predict %t/m.mlir --checkpoint %t/ck --data %t/with-id.csv --out %t/p 2>&1 | FileCheck %s --check-prefix=ID
// ID: error: {{.*}}with-id.csv: its columns are not the features the checkpoint's run trained on ('a', 'b', 'c', then the label 'label'): 'id' is not among them; columns are read by position
// RUN: awk -F, -v OFS=, '{print $3, $2, $1, $4}' %t/train.csv > %t/reordered.csv
// RUN: not aicf eval %t/m.mlir --checkpoint %t/ck --data %t/reordered.csv --out %t/e 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: {{.*}}reordered.csv: its columns are not the features the checkpoint's run trained on ('a', 'b', 'c', then the label 'label'): the same features in another order
// A table without a header is read by position, as before.
// RUN: tail -n +2 %t/features.csv > %t/bare.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/bare.csv --out %t/p | wc -l | FileCheck %s --check-prefix=ROWS
//
// pandas' names of an unnamed frame of four columns.
// (Below six columns such a row may be data, `0,1` of y = x + 1: read,
// and said where the rows below are not whole numbers.)
// RUN: python3 -c "print('0,1,2,3'); [print(f'{i / 7:.3f},{i / 11:.3f},{i / 13:.3f},{i %% 4}') for i in range(50)]" > %t/numbered.csv
// RUN: aicf propose --data %t/numbered.csv -o %t/mn.mlir --runs-db %t/runs.sqlite > /dev/null 2>&1
// RUN: aicf train %t/mn.mlir --data %t/numbered.csv --epochs 1 --no-runs-db --no-progress --out %t/n 2>&1 | FileCheck %s --check-prefix=PANDAS
// PANDAS: note: {{.*}}numbered.csv:1: the first row, 0, 1, ..., 3, above rows of other numbers, is read as a row of data; if it is pandas' column names
// PANDAS: data: 51 rows
// A first row 0, 1, 2, 3 among whole numbers is data, unremarked.
// RUN: python3 -c "print('0,1,2,3'); [print(f'{i %% 5},{i %% 3},{i %% 7},{i %% 2}') for i in range(50)]" > %t/integers.csv
// RUN: aicf propose --data %t/integers.csv -o %t/mi.mlir --runs-db %t/runs.sqlite > /dev/null 2>&1
// RUN: aicf train %t/mi.mlir --data %t/integers.csv --epochs 1 --no-runs-db --no-progress --out %t/i 2>&1 | FileCheck %s --check-prefix=INTS
// INTS-NOT: the first row
// INTS: data: 51 rows
//
// A label column that is not last is said.
// RUN: awk -F, -v OFS=, '{print $4, $1, $2, $3}' %t/train.csv > %t/label-first.csv
// RUN: not aicf train %t/m.mlir --data %t/label-first.csv --epochs 1 --no-runs-db --no-progress --out %t/l 2>&1 | FileCheck %s --check-prefix=FIRST
// FIRST: error: {{.*}}label-first.csv:2: the label {{.*}} is not a class index{{.*}} (column 1 is named 'label', yet a table's label is its last column ('c' here): give --label 'label' (or move it last)
// Where the last column reads as classes too, it is a note.
// RUN: awk -F, -v OFS=, 'NR == 1 {print "target", $1, $2, "rooms"; next} {print $4, $1, $2, (NR %% 2)}' %t/train.csv > %t/rooms.csv
// RUN: aicf train %t/m.mlir --data %t/rooms.csv --epochs 1 --no-runs-db --no-progress --out %t/r 2>&1 | FileCheck %s --check-prefix=ROOMS
// ROOMS: note: {{.*}}rooms.csv: column 1 is named 'target', yet a table's label is its last column ('rooms' here): give --label 'target' (or move it last), or this model learns to predict 'rooms'
//
// --label names the label's column wherever it is: the run learns what the
// table with the label last learns (the same bits), records the column, and
// eval, predict (features alone, or with the label anywhere) and a resume
// read tables so; another label on a resume is refused, as is a name the
// header lacks. Propose reads it too.
// RUN: aicf train %t/m.mlir --data %t/label-first.csv --label label --epochs 2 --no-runs-db --no-progress --out %t/lf --checkpoint-dir %t/lf/ck > /dev/null
// RUN: python3 %S/inputs/same_tensors.py %t/lf/ck/last.safetensors %t/ck/last.safetensors | FileCheck %s --check-prefix=SAMEBITS
// SAMEBITS: 0 of {{[0-9]+}} tensors differ
// RUN: aicf eval %t/m.mlir --checkpoint %t/lf/ck --data %t/label-first.csv --out %t/e | FileCheck %s --check-prefix=LEVAL
// LEVAL: accuracy {{[0-9.]+}}% on 40 held-out rows
// RUN: aicf predict %t/m.mlir --checkpoint %t/lf/ck --data %t/label-first.csv --out %t/p > %t/p-first.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/lf/ck --data %t/features.csv --out %t/p > %t/p-alone.csv
// RUN: aicf predict %t/m.mlir --checkpoint %t/ck --data %t/features.csv --out %t/p > %t/p-last.csv
// RUN: cmp %t/p-first.csv %t/p-alone.csv
// RUN: cmp %t/p-first.csv %t/p-last.csv
// RUN: not aicf train %t/m.mlir --data %t/label-first.csv --label a --epochs 3 --no-runs-db --no-progress --out %t/lf --checkpoint-dir %t/lf/ck --resume 2>&1 | FileCheck %s --check-prefix=OTHERLABEL
// OTHERLABEL: error: --label a: {{.*}}last.safetensors trained to predict column 'label'; another label is another task
// RUN: aicf train %t/m.mlir --data %t/label-first.csv --epochs 3 --no-runs-db --no-progress --out %t/lf --checkpoint-dir %t/lf/ck --resume 2>&1 | FileCheck %s --check-prefix=LRESUME
// LRESUME: final held-out accuracy
// RUN: not aicf train %t/m.mlir --data %t/label-first.csv --label Label2 --epochs 1 --no-runs-db --out %t/x 2>&1 | FileCheck %s --check-prefix=NOLABEL
// NOLABEL: error: {{.*}}label-first.csv:1: --label Label2: no column of that name in the first row ('label', 'a', 'b', 'c')
// RUN: aicf propose --data %t/label-first.csv --label label --structure "mlp 8" -o %t/lp.mlir --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=LPROPOSE
// LPROPOSE: wrote {{.*}}lp.mlir (mlp 8,
// The header's spelling is recorded (--label LABEL found 'label'; a resume
// naming it either way goes on); two columns of the name are refused; a
// data set that is no table has no columns to name.
// RUN: aicf train %t/m.mlir --data %t/label-first.csv --label LABEL --epochs 1 --no-runs-db --no-progress --out %t/lc --checkpoint-dir %t/lc/ck > /dev/null
// RUN: aicf train %t/m.mlir --data %t/label-first.csv --label label --epochs 2 --no-runs-db --no-progress --out %t/lc --checkpoint-dir %t/lc/ck --resume 2>&1 | FileCheck %s --check-prefix=LRESUME
// RUN: awk -F, -v OFS=, 'NR == 1 {$2 = "label"} {print}' %t/label-first.csv > %t/two-labels.csv
// RUN: not aicf train %t/m.mlir --data %t/two-labels.csv --label label --epochs 1 --no-runs-db --out %t/x 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: {{.*}}two-labels.csv:1: --label label: 2 columns of that name (columns 1 and 2): name the columns apart
// RUN: not aicf train %S/../../../examples/char_lm/char_lm.mlir --data %S/../../../data/tinyshakespeare.txt --label label --epochs 1 --no-runs-db --out %t/x 2>&1 | FileCheck %s --check-prefix=NOTABLE
// NOTABLE: error: --label label: names a column of a table's header (a CSV); {{.*}}tinyshakespeare.txt is no table
//
// Upper-case .CSV.GZ is decompressed.
// RUN: gzip -c %t/train.csv > %t/UPPER.CSV.GZ
// RUN: aicf train %t/m.mlir --data %t/UPPER.CSV.GZ --epochs 1 --no-runs-db --no-progress --out %t/u 2>&1 | FileCheck %s --check-prefix=GZ
// GZ: data: 200 rows
//
// An id column trains as a feature: said. A missing value is named as
// one, with its column's name; a feature at a far smaller scale than the
// others (lost under one shared scale) points to --standardize.
// RUN: awk -F, -v OFS=, 'NR == 1 {print "PassengerId", $0; next} {print NR + 100, $0}' %t/train.csv > %t/ids.csv
// RUN: aicf propose --data %t/ids.csv -o %t/m4.mlir --runs-db %t/runs.sqlite > /dev/null 2>&1
// RUN: aicf train %t/m4.mlir --data %t/ids.csv --epochs 1 --no-runs-db --no-progress --out %t/ids 2>&1 | FileCheck %s --check-prefix=IDS
// IDS: note: {{.*}}ids.csv: column 1 ('PassengerId') holds a different whole number in every row: an id column? It trains as a feature
// RUN: awk -F, -v OFS=, 'NR == 5 {$2 = "NA"} {print}' %t/train.csv > %t/na.csv
// RUN: not aicf train %t/m.mlir --data %t/na.csv --epochs 1 --no-runs-db --no-progress --out %t/na 2>&1 | FileCheck %s --check-prefix=NA
// NA: error: {{.*}}na.csv:5: column 2 ('b') is 'NA': invalid float literal (a missing value? AICF reads tables of numbers alone: fill it
// RUN: awk -F, -v OFS=, 'NR > 1 {$1 = $1 * 1000; $2 = $2 * 1000} {print}' %t/train.csv > %t/scales.csv
// RUN: aicf train %t/m.mlir --data %t/scales.csv --epochs 1 --no-runs-db --no-progress --out %t/sc 2>&1 | FileCheck %s --check-prefix=SMALL
// SMALL: note: {{.*}}scales.csv: feature 2 (counting from 0) of input #0 reaches only {{.*}} of the median feature's largest magnitude
//
// A European spreadsheet's CSV (';' between cells, decimal commas) and a
// TSV read as the comma-separated table does: the same rows, the same run.
// RUN: sed -e 's/,/;/g' %t/train.csv | sed -e 's/\([0-9]\)\.\([0-9]\)/\1,\2/g' > %t/euro.csv
// RUN: tr ',' '\t' < %t/train.csv > %t/train.tsv.csv
// RUN: aicf train %t/m.mlir --data %t/train.csv --epochs 2 --no-runs-db --no-progress --out %t/c1 2>&1 | grep "final held-out" | cut -d'(' -f1 > %t/comma.txt
// RUN: FileCheck %s --check-prefix=COMMA < %t/comma.txt
// COMMA: final held-out accuracy {{[0-9.]+}}% after 2 epochs
// RUN: aicf train %t/m.mlir --data %t/euro.csv --epochs 2 --no-runs-db --no-progress --out %t/c2 2>&1 | FileCheck %s --check-prefix=EURO
// EURO: note: {{.*}}euro.csv: read as values separated by ';' (its first line's), a decimal comma as a point
// RUN: aicf train %t/m.mlir --data %t/euro.csv --epochs 2 --no-runs-db --no-progress --out %t/c2 2>&1 | grep "final held-out" | cut -d'(' -f1 | cmp - %t/comma.txt
// RUN: aicf train %t/m.mlir --data %t/train.tsv.csv --epochs 2 --no-runs-db --no-progress --out %t/c3 2>&1 | grep "final held-out" | cut -d'(' -f1 | cmp - %t/comma.txt
// A ';' inside a quoted name is no separator; a headerless ';' table whose
// decimal commas outnumber its separators is one.
// RUN: printf '"width; cm",label\n1.5,0\n2.5,1\n3.5,0\n' > %t/quoted.csv
// RUN: aicf propose --data %t/quoted.csv -o %t/q.mlir --structure "mlp 4" --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=QUOTED
// QUOTED: wrote {{.*}}q.mlir
// RUN: printf '1,5;2,25;0,75\n2,5;1,25;1,5\n3,5;0,5;2\n' > %t/euro2.csv
// RUN: aicf propose --data %t/euro2.csv -o %t/e.mlir --structure "mlp 4" --task regression --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=EURO2
// EURO2: wrote {{.*}}e.mlir (mlp 4, 17 parameters)
// A number with thousands separators, and a file in Latin-1, are said.
// RUN: printf 'a,b,label\n1,"1,257",0\n2,3,1\n' > %t/thousands.csv
// RUN: not aicf propose --data %t/thousands.csv -o %t/t.mlir --structure "mlp 4" --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=THOUSANDS
// THOUSANDS: error: {{.*}}thousands.csv:2: column 2 ('b') is '1,257': invalid float literal (a number written with thousands separators? write it without them
// RUN: printf 'caf\xe9,b,label\n1,2,0\n2,3,1\n' > %t/latin.csv
// RUN: not aicf propose --data %t/latin.csv -o %t/t.mlir --structure "mlp 4" --runs-db %t/runs.sqlite 2>&1 | FileCheck %s --check-prefix=LATIN
// LATIN: error: {{.*}}latin.csv:1: {{.*}}invalid utf-8{{.*}} (not UTF-8 text: a spreadsheet's export in Latin-1 or UTF-16? save it as CSV UTF-8
