"""asv benchmark suites of mlaperf (decode kernels, indexer path, decode step); see asv.conf.json."""
