"""The examples of the guide's pages (Training, Encoding and engines, Token datasets, Pretrained
tokenizers, Looking inside), run exactly as tests/test_docs_examples.py runs every other page. They
are a file of their own so that pytest-xdist, which hands out a file at a time, can run them beside
the other pages' examples instead of after them."""

import pytest

from tests.test_docs_examples import GUIDE, pages, run_page_test


def test_the_guide_is_among_the_pages():
    assert set(GUIDE) <= set(pages())


@pytest.mark.parametrize("page", GUIDE)
def test_guide_page_examples(page, tiktoken_cache, tmp_path, request, record_property):
    run_page_test(page, tiktoken_cache, tmp_path, request, record_property)
