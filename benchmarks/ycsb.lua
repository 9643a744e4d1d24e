#!/usr/bin/env sysbench
-- YCSB core workloads A-F as a sysbench 1.0 script, for the pgsql and mysql drivers.
--
-- Written for agenticdb from the YCSB core workload definitions (Cooper et al., "Benchmarking Cloud
-- Serving Systems with YCSB", SoCC 2010, and the YCSB wiki "Core Workloads"):
--   a  update heavy      50% read, 50% update             zipfian
--   b  read mostly       95% read,  5% update             zipfian
--   c  read only        100% read                         zipfian
--   d  read latest       95% read,  5% insert             latest
--   e  short ranges      95% scan,  5% insert             zipfian (scan length uniform 1..maxscanlength)
--   f  read-modify-write 50% read, 50% read-modify-write  zipfian
-- One sysbench event is one YCSB operation (a read-modify-write is a read then an update).
--
-- Table: usertable(ycsb_key BIGINT PRIMARY KEY, field0..field<N-1> VARCHAR(fieldlength)). Keys are
-- integers 1..recordcount (YCSB hashes "user<n>" strings; an integer key keeps the SQL portable).
-- Reads fetch all fields (readallfields=true); updates write one random field (writeallfields=false).
--
-- The zipfian generator is the rejection-free method of Gray et al., "Quickly Generating
-- Billion-Record Synthetic Databases" (SIGMOD 1994), with YCSB's default constant 0.99; the rank is
-- scrambled over the key space by Fibonacci hashing so the hot keys are spread out (YCSB uses
-- an FNV hash for the same purpose). "latest" picks newest keys first: max_key - zipfian rank.
--
-- Usage: sysbench ycsb.lua --db-driver=pgsql|mysql <connection options> --workload=a
--        [--recordcount=N --fieldcount=10 --fieldlength=100 --distribution=zipfian|uniform|latest]
--        prepare | run | cleanup

sysbench.cmdline.options = {
   workload = {"YCSB core workload: a, b, c, d, e or f", "a"},
   recordcount = {"Number of records loaded by prepare", 10000},
   fieldcount = {"Number of VARCHAR fields per record", 10},
   fieldlength = {"Length of each field in characters", 100},
   distribution = {"Request distribution: zipfian, uniform or latest (default: the workload's)", ""},
   zipfconst = {"Zipfian constant (theta)", 0.99},
   maxscanlength = {"Maximum scan length (workload e)", 100},
   batch = {"Rows per INSERT statement during prepare", 200},
}

-- {read, update, insert, scan, rmw, default distribution}
local MIXES = {
   a = {0.50, 0.50, 0.00, 0.00, 0.00, "zipfian"},
   b = {0.95, 0.05, 0.00, 0.00, 0.00, "zipfian"},
   c = {1.00, 0.00, 0.00, 0.00, 0.00, "zipfian"},
   d = {0.95, 0.00, 0.05, 0.00, 0.00, "latest"},
   e = {0.00, 0.00, 0.05, 0.95, 0.00, "zipfian"},
   f = {0.50, 0.00, 0.00, 0.00, 0.50, "zipfian"},
}

local function mix()
   local m = MIXES[sysbench.opt.workload]
   if m == nil then
      error("--workload=" .. tostring(sysbench.opt.workload) .. ": expected one of a, b, c, d, e, f")
   end
   return m
end

local function random_field()
   return sysbench.rand.string(string.rep("@", sysbench.opt.fieldlength))
end

local function field_list()
   local names = {}
   for i = 0, sysbench.opt.fieldcount - 1 do
      names[#names + 1] = "field" .. i
   end
   return table.concat(names, ", ")
end

local function row_values(key)
   local vals = {tostring(key)}
   for _ = 1, sysbench.opt.fieldcount do
      vals[#vals + 1] = "'" .. random_field() .. "'"
   end
   return "(" .. table.concat(vals, ", ") .. ")"
end

-- ---------------------------------------------------------------- commands

function cmd_prepare()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   local cols = {"ycsb_key BIGINT NOT NULL PRIMARY KEY"}
   for i = 0, sysbench.opt.fieldcount - 1 do
      cols[#cols + 1] = string.format("field%d VARCHAR(%d) NOT NULL", i, sysbench.opt.fieldlength)
   end
   print("Creating table 'usertable'...")
   con:query("CREATE TABLE usertable (" .. table.concat(cols, ", ") .. ")")
   local n = sysbench.opt.recordcount
   local prefix = "INSERT INTO usertable (ycsb_key, " .. field_list() .. ") VALUES "
   print(string.format("Inserting %d records into 'usertable'", n))
   local key = 1
   while key <= n do
      local rows = {}
      local last = math.min(key + sysbench.opt.batch - 1, n)
      for k = key, last do
         rows[#rows + 1] = row_values(k)
      end
      con:query(prefix .. table.concat(rows, ", "))
      key = last + 1
   end
   con:disconnect()
end

function cmd_cleanup()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   print("Dropping table 'usertable'...")
   con:query("DROP TABLE IF EXISTS usertable")
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare},
   cleanup = {cmd_cleanup},
}

-- ---------------------------------------------------------------- key generators

local zipf = {}

local function zipf_init(n, theta)
   local zetan = 0
   for i = 1, n do
      zetan = zetan + 1 / (i ^ theta)
   end
   local zeta2 = 1 + 0.5 ^ theta
   zipf.n = n
   zipf.theta = theta
   zipf.zetan = zetan
   zipf.alpha = 1 / (1 - theta)
   zipf.eta = (1 - (2 / n) ^ (1 - theta)) / (1 - zeta2 / zetan)
   zipf.half_pow = 0.5 ^ theta
end

-- Spread popularity ranks over the key space (YCSB's ScrambledZipfianGenerator hashes the rank for the
-- same reason): Fibonacci hashing, the rank times 2^64/phi modulo 2^64, top 53 bits, modulo n. Like
-- YCSB's hash it is not a permutation; a few keys share ranks.
local ffi = require("ffi")
local GOLDEN = 11400714819323198485ULL

local function scramble(rank, n)
   local h = ffi.cast("uint64_t", rank + 1) * GOLDEN
   return tonumber(bit.rshift(h, 11)) % n + 1
end

-- rank in 0..n-1, rank 0 the most popular
local function zipf_rank()
   local u = sysbench.rand.uniform_double()
   local uz = u * zipf.zetan
   if uz < 1 then
      return 0
   end
   if uz < 1 + zipf.half_pow then
      return 1
   end
   local r = math.floor(zipf.n * (zipf.eta * u - zipf.eta + 1) ^ zipf.alpha)
   if r >= zipf.n then
      r = zipf.n - 1
   end
   return r
end

local dist, max_key, next_insert, inserted

local function existing_key()
   local n = sysbench.opt.recordcount
   if dist == "uniform" then
      return sysbench.rand.uniform(1, n)
   elseif dist == "latest" then
      local latest = max_key + inserted * sysbench.opt.threads
      local k = latest - zipf_rank()
      if k < 1 then
         k = 1
      end
      return k
   end
   return scramble(zipf_rank(), n)
end

-- ---------------------------------------------------------------- run

function thread_init()
   local m = mix()
   dist = sysbench.opt.distribution
   if dist == "" then
      dist = m[6]
   end
   if dist ~= "zipfian" and dist ~= "uniform" and dist ~= "latest" then
      error("--distribution=" .. dist .. ": expected zipfian, uniform or latest")
   end
   if dist ~= "uniform" then
      zipf_init(sysbench.opt.recordcount, sysbench.opt.zipfconst)
   end
   drv = sysbench.sql.driver()
   con = drv:connect()
   local rs = con:query("SELECT COALESCE(MAX(ycsb_key), 0) FROM usertable")
   max_key = tonumber(rs:fetch_row()[1])
   -- thread t inserts max_key + t + 1, + threads, ... : unique across threads and later runs
   next_insert = max_key + sysbench.tid + 1
   inserted = 0
   fields = field_list()
end

function thread_done()
   con:disconnect()
end

local function op_read(key)
   con:query("SELECT ycsb_key, " .. fields .. " FROM usertable WHERE ycsb_key = " .. key)
end

local function op_update(key)
   local f = sysbench.rand.uniform(0, sysbench.opt.fieldcount - 1)
   con:query(string.format("UPDATE usertable SET field%d = '%s' WHERE ycsb_key = %d", f, random_field(), key))
end

local function op_insert()
   con:query("INSERT INTO usertable (ycsb_key, " .. fields .. ") VALUES " .. row_values(next_insert))
   next_insert = next_insert + sysbench.opt.threads
   inserted = inserted + 1
end

local function op_scan(key)
   local len = sysbench.rand.uniform(1, sysbench.opt.maxscanlength)
   con:query(string.format("SELECT ycsb_key, %s FROM usertable WHERE ycsb_key >= %d ORDER BY ycsb_key LIMIT %d",
                           fields, key, len))
end

function event()
   local m = MIXES[sysbench.opt.workload]
   local u = sysbench.rand.uniform_double()
   if u < m[1] then
      op_read(existing_key())
   elseif u < m[1] + m[2] then
      op_update(existing_key())
   elseif u < m[1] + m[2] + m[3] then
      op_insert()
   elseif u < m[1] + m[2] + m[3] + m[4] then
      op_scan(existing_key())
   else
      local key = existing_key()
      op_read(key)
      op_update(key)
   end
end
