module profcol.test/pprof_target

go 1.22
