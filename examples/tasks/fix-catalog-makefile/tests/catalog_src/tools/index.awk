# index.awk: print "sku<TAB>name" for every data row of the parts CSVs given (run with -F,).
FNR == 1 { next }
NF >= 2 { printf "%s\t%s\n", $1, $2 }
