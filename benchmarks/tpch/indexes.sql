-- Secondary indexes on foreign-key columns (TPC-H 3.0.1 clause 1.5.4 allows indexes on foreign keys),
-- created after loading. Without them the correlated subqueries of Q2, Q17, Q20 and Q21 become
-- nested full scans on MySQL/MariaDB.
CREATE INDEX lineitem_part_supp ON lineitem (l_partkey, l_suppkey);
CREATE INDEX lineitem_supp ON lineitem (l_suppkey);
CREATE INDEX orders_cust ON orders (o_custkey);
CREATE INDEX partsupp_supp ON partsupp (ps_suppkey);
CREATE INDEX customer_nation ON customer (c_nationkey);
CREATE INDEX supplier_nation ON supplier (s_nationkey);
CREATE INDEX nation_region ON nation (n_regionkey);
