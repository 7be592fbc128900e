"""The prompt -> FTS5 query: quoting, syntax characters, stop words; every query parses."""

import unittest

from .helpers import TempIndex, user

from fts_query import MAX_TERMS, fts_query, prompt_terms  # noqa: E402


class FtsQueryTest(unittest.TestCase):
    def test_words_quoted_and_ored(self):
        self.assertEqual(fts_query("Which ticket was the ledger bug?"), '"ticket" OR "ledger" OR "bug"')

    def test_stop_words_and_short_words_mean_no_recall(self):
        self.assertIsNone(fts_query(""))
        self.assertIsNone(fts_query("   "))
        self.assertIsNone(fts_query("what did you say about it, and then?"))
        self.assertIsNone(fts_query("a b c ? ! ***"))

    def test_fts_syntax_is_not_syntax(self):
        terms = prompt_terms('NEAR(foo bar) AND body:"x" OR -baz* ^qux {col} NOT')
        self.assertEqual(terms, ["near", "foo", "bar", "body", "baz", "qux", "col"])
        # AND / OR / NOT are words (lowercased, quoted) or stop words, never operators.
        self.assertNotIn("and", terms)

    def test_identifiers_and_unicode(self):
        self.assertEqual(prompt_terms("reconcileLedgerEntries in invoice_reconciler.ts"), ["reconcileledgerentries", "invoice_reconciler", "ts"])
        self.assertEqual(prompt_terms("Crème brûlée für Ärzte"), ["crème", "brûlée", "für", "ärzte"])

    def test_repeats_dropped_and_terms_capped(self):
        self.assertEqual(prompt_terms("ledger Ledger LEDGER"), ["ledger"])
        many = " ".join("word%d" % i for i in range(100))
        self.assertEqual(len(prompt_terms(many)), MAX_TERMS)

    def test_every_query_parses_in_fts5(self):
        t = TempIndex()
        try:
            t.index.ingest("s", [user('the "ledger" NEAR broke: AND (really) -- col:x *')])
            for prompt in ['"', '""', "NEAR(", "AND OR NOT", "col:x", "x*", "^start", "(a OR", "ledger's", "über-ledger", "-", "_", "__init__"]:
                query = fts_query(prompt)
                if query is not None:
                    t.index.search("s", query, None, 10)  # raises sqlite3.OperationalError on a syntax error
            self.assertEqual(len(t.index.search("s", fts_query("ledger NEAR broke"), None, 10)), 1)
        finally:
            t.cleanup()


if __name__ == "__main__":
    unittest.main()
