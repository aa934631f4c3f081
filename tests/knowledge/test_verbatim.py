"""knowledge/verbatim.py: the guard every stored text passes (no run of ten words of a message)."""

from __future__ import annotations

import pytest

from knowledge import verbatim
from tests.knowledge.conftest import MESSAGE

# Tricky texts for the one verbatim rule (knowledge/verbatim.py): (stored text, source, longest shared run).
_SOURCE = "We'll ship the café's new crème brûlée menu to all twelve sites on Monday"
_TRICKY = [
    # curly apostrophes are straight ones, case is folded: 12 words shared
    ("we\u2019ll SHIP the caf\u00e9\u2019s new cr\u00e8me br\u00fbl\u00e9e menu to all twelve sites", _SOURCE, 12),
    ("We'll ship the café's new crème brûlée menu to", _SOURCE, 9),  # nine words: allowed
    ("WE'LL, ship; the café's... new crème-brûlée menu! to all twelve", _SOURCE, 11),  # punctuation is no word
    ("We'll ship the cafe's new creme brulee menu to all twelve sites", _SOURCE, 5),  # accents are kept
    # Greek: casefold makes the final sigma a sigma, so ΣΊΣΥΦΟΣ and σίσυφος are one word
    ("ΣΊΣΥΦΟΣ a b c d e f g h", "σίσυφος a b c d e f g h i", 9),
    ("σίσυφος a b c d e f g h i", "ΣΊΣΥΦΟΣ a b c d e f g h", 9),
    ("σίσυφος a b c d e f g h i", "ΣΊΣΥΦΟΣ a b c d e f g h i", 10),
    ("Straße 1 2 3 4 5 6 7 8 9", "STRASSE 1 2 3 4 5 6 7 8 9", 10),  # casefold: ß is ss
    ("a_b c d e f g h i j k", "a b c d e f g h i j k", 11),  # the underscore splits words
    ("1,000 users 2.5 GB on 3 nodes by 4 pm today", "1 000 users 2 5 GB on 3 nodes by 4 pm today", 13),
    ("", _SOURCE, 0),
]


def test_guard_refuses_a_ten_word_run_and_allows_nine():
    nine = "we settle on nightly snapshots kept for thirty days"
    assert verbatim.guard_text(f"Alice said {nine}", [MESSAGE])
    with pytest.raises(verbatim.VerbatimText):
        verbatim.guard_text(f"Alice said {nine} in", [MESSAGE])


@pytest.mark.parametrize(("text", "source", "run"), _TRICKY)
def test_guard_text_and_verbatim_is_safe_agree(text, source, run):
    assert verbatim.longest_common_run(text, [source]) == run
    assert verbatim.is_safe(text, [source]) == (run <= verbatim.MAX_RUN)
    if run <= verbatim.MAX_RUN:
        assert verbatim.guard_text(text, [source]) == text
    else:
        with pytest.raises(verbatim.VerbatimText):
            verbatim.guard_text(text, [source])
