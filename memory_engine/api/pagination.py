"""DRF-style pages: {count, next, previous, results}, ?page= and ?page_size= (max 200)."""

from rest_framework import pagination


class PageNumberPagination(pagination.PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
